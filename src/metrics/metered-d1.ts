import type { Cost } from './cost.ts'

type Meta = { rows_read?: number; rows_written?: number; duration?: number } | undefined

function addMeta(cost: Cost, meta: Meta): void {
  cost.d1RowsRead += meta?.rows_read ?? 0
  cost.d1RowsWritten += meta?.rows_written ?? 0
  cost.d1Ms += meta?.duration ?? 0
}

/**
 * A statement whose execution is counted into `cost`. `first()` runs as
 * `all()` and picks the first row, because `first()` drops D1's `meta` and
 * with it the rows read; `raw()` drops it too and counts only as a statement
 * (nothing of ours uses it). D1's `batch()` reads a statement's `statement`
 * and `params`, which it forwards.
 *
 * A class, not a Proxy nor an object made per statement with its own methods:
 * the Proxy's trap ran for every property D1 read of every statement (3.8 %
 * of the isolate's samples in the bench's profile), and an object with
 * methods defined per statement cost more still (10.7 %).
 */
class MeteredStatement {
  readonly #inner: D1PreparedStatement
  readonly #cost: Cost
  readonly #shard: number | undefined

  constructor(inner: D1PreparedStatement, cost: Cost, shard: number | undefined) {
    this.#inner = inner
    this.#cost = cost
    this.#shard = shard
  }

  get statement(): string {
    return (this.#inner as unknown as { statement: string }).statement
  }

  get params(): unknown[] {
    return (this.#inner as unknown as { params: unknown[] }).params
  }

  bind(...values: unknown[]): MeteredStatement {
    return new MeteredStatement(this.#inner.bind(...values), this.#cost, this.#shard)
  }

  run<T>(): Promise<D1Result<T>> {
    return this.#counted(() => this.#inner.run<T>())
  }

  all<T>(): Promise<D1Result<T>> {
    return this.#counted(() => this.#inner.all<T>())
  }

  async first(column?: string): Promise<unknown> {
    const result = await this.#counted(() => this.#inner.all<Record<string, unknown>>())
    const row = result.results[0]
    if (row === undefined) return null
    if (column === undefined) return row
    // As D1's own first(column).
    if (!(column in row)) throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${column})`)
    return row[column]
  }

  raw(...args: Parameters<D1PreparedStatement['raw']>): ReturnType<D1PreparedStatement['raw']> {
    this.#executed()
    return this.#inner.raw(...args)
  }

  /** The statement itself, for D1's `batch()`. */
  get inner(): D1PreparedStatement {
    return this.#inner
  }

  #executed(): void {
    this.#cost.d1RoundTrips += 1
    countStatements(this.#cost, 1, this.#shard)
  }

  async #counted<T>(run: () => Promise<D1Result<T>>): Promise<D1Result<T>> {
    this.#executed()
    const result = await run()
    addMeta(this.#cost, result.meta)
    return result
  }
}

function meteredStatement(statement: D1PreparedStatement, cost: Cost, shard: number | undefined): D1PreparedStatement {
  return new MeteredStatement(statement, cost, shard) as unknown as D1PreparedStatement
}

/** Counts statements, and with D1 shards each shard's too (`d1StatementsByShard`). */
function countStatements(cost: Cost, count: number, shard: number | undefined): void {
  cost.d1Statements += count
  if (shard !== undefined && cost.d1StatementsByShard) {
    cost.d1StatementsByShard[shard] = (cost.d1StatementsByShard[shard] ?? 0) + count
  }
}

/**
 * The D1 binding with what it costs counted into `cost`: round trips (a
 * `batch()` is one request, as Cloudflare counts it against an invocation's
 * D1 queries — src/platform-limits.ts), statements, and D1's own rows read
 * and written from each result's `meta`. `shard`: the D1 shard it is
 * (src/d1/shards.ts), whose statements are counted apart too when the cost
 * keeps them per shard.
 */
export function meteredD1(db: D1Database, cost: Cost, shard?: number): D1Database {
  return new Proxy(db, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (property === 'prepare') return (query: string) => meteredStatement(target.prepare(query), cost, shard)
      if (property === 'batch') {
        return async (statements: D1PreparedStatement[]) => {
          cost.d1RoundTrips += 1
          countStatements(cost, statements.length, shard)
          // D1's own statements: batch() may want more of them than `statement` and `params`.
          const results = await target.batch(
            statements.map((statement) => (statement instanceof MeteredStatement ? statement.inner : statement)),
          )
          for (const result of results) addMeta(cost, result.meta)
          return results
        }
      }
      if (property === 'exec') {
        return async (query: string) => {
          cost.d1RoundTrips += 1
          const result = await target.exec(query)
          countStatements(cost, result.count, shard)
          return result
        }
      }
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}
