import type { Cost } from './cost.ts'

type Meta = { rows_read?: number; rows_written?: number } | undefined

function addMeta(cost: Cost, meta: Meta): void {
  cost.d1RowsRead += meta?.rows_read ?? 0
  cost.d1RowsWritten += meta?.rows_written ?? 0
}

/**
 * A statement whose execution is counted into `cost`. `first()` runs as
 * `all()` and picks the first row, because `first()` drops D1's `meta` and
 * with it the rows read; `raw()` drops it too and counts only as a statement
 * (nothing of ours uses it).
 *
 * The metered statement inherits from the real one (its `statement` and
 * `params` are read through the prototype, as `batch()` reads them) and
 * overrides only the methods that execute or bind. Not a Proxy: a Proxy's
 * trap ran for every property D1 read of every statement, a few % of the
 * isolate's CPU in the bench's profile.
 */
function meteredStatement(statement: D1PreparedStatement, cost: Cost): D1PreparedStatement {
  const executed = () => {
    cost.d1RoundTrips += 1
    cost.d1Statements += 1
  }
  const counted = async <T>(run: () => Promise<D1Result<T>>): Promise<D1Result<T>> => {
    executed()
    const result = await run()
    addMeta(cost, result.meta)
    return result
  }
  const methods = {
    bind: (...values: unknown[]) => meteredStatement(statement.bind(...values), cost),
    run: <T>() => counted(() => statement.run<T>()),
    all: <T>() => counted(() => statement.all<T>()),
    first: async (column?: string) => {
      const result = await counted(() => statement.all<Record<string, unknown>>())
      const row = result.results[0]
      if (row === undefined) return null
      if (column === undefined) return row
      // As D1's own first(column).
      if (!(column in row)) throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${column})`)
      return row[column]
    },
    raw: (...args: Parameters<D1PreparedStatement['raw']>) => {
      executed()
      return statement.raw(...args)
    },
  }
  return Object.create(
    statement,
    Object.fromEntries(Object.entries(methods).map(([name, value]) => [name, { value }])),
  ) as D1PreparedStatement
}

/**
 * The D1 binding with what it costs counted into `cost`: round trips (a
 * `batch()` is one request, as Cloudflare counts it against an invocation's
 * D1 queries — src/platform-limits.ts), statements, and D1's own rows read
 * and written from each result's `meta`.
 */
export function meteredD1(db: D1Database, cost: Cost): D1Database {
  return new Proxy(db, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (property === 'prepare') return (query: string) => meteredStatement(target.prepare(query), cost)
      if (property === 'batch') {
        return async (statements: D1PreparedStatement[]) => {
          cost.d1RoundTrips += 1
          cost.d1Statements += statements.length
          const results = await target.batch(statements)
          for (const result of results) addMeta(cost, result.meta)
          return results
        }
      }
      if (property === 'exec') {
        return async (query: string) => {
          cost.d1RoundTrips += 1
          const result = await target.exec(query)
          cost.d1Statements += result.count
          return result
        }
      }
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}
