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
 */
function meteredStatement(statement: D1PreparedStatement, cost: Cost): D1PreparedStatement {
  const executed = () => {
    cost.d1RoundTrips += 1
    cost.d1Statements += 1
  }
  return new Proxy(statement, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (typeof value !== 'function') return value
      switch (property) {
        case 'bind':
          return (...args: unknown[]) => meteredStatement(value.apply(target, args), cost)
        case 'run':
        case 'all':
          return async (...args: unknown[]) => {
            executed()
            const result = (await value.apply(target, args)) as D1Result
            addMeta(cost, result.meta)
            return result
          }
        case 'first':
          return async (column?: string) => {
            executed()
            const result = await target.all<Record<string, unknown>>()
            addMeta(cost, result.meta)
            const row = result.results[0]
            if (row === undefined) return null
            if (column === undefined) return row
            // As D1's own first(column).
            if (!(column in row)) throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${column})`)
            return row[column]
          }
        case 'raw':
          return (...args: unknown[]) => {
            executed()
            return value.apply(target, args)
          }
        default:
          return value.bind(target)
      }
    },
  })
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
