const EXECUTIONS = new Set(['run', 'all', 'first', 'raw'])

/**
 * The D1 binding with every round trip counted: a `batch()` is one, and so is
 * a statement run on its own (`run`, `all`, `first`, `raw`). The consumers log
 * the count per queue batch, so that what the benchmark reports is measured,
 * not derived from how the code is meant to behave. A round trip is also what
 * Cloudflare counts against an invocation's D1 queries: the binding sends a
 * whole batch as one request (src/platform-limits.ts).
 */
export function countRoundTrips(db: D1Database): { db: D1Database; roundTrips: () => number } {
  let count = 0
  const wrapStatement = (statement: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(statement, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver)
        if (typeof value !== 'function') return value
        if (property === 'bind') return (...args: unknown[]) => wrapStatement(value.apply(target, args))
        if (EXECUTIONS.has(String(property))) {
          return (...args: unknown[]) => {
            count += 1
            return value.apply(target, args)
          }
        }
        return value.bind(target)
      },
    })
  const counted = new Proxy(db, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver)
      if (property === 'prepare') return (query: string) => wrapStatement(target.prepare(query))
      if (property === 'batch' || property === 'exec') {
        return (...args: unknown[]) => {
          count += 1
          return (value as (...args: unknown[]) => unknown).apply(target, args)
        }
      }
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return { db: counted, roundTrips: () => count }
}
