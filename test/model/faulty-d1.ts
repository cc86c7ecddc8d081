/**
 * The real local D1, with one call made to fail when the model says so: "the
 * k-th call from now" — a `batch()` (one transaction: all of it or none, as
 * D1 runs it) or a statement's `run`/`all`/`first`/`raw` — throws before it
 * reaches the database, as a request to D1 that fails does. A consumer
 * invocation makes a handful of calls, so failing its k-th lands between two
 * of its steps: after a send, before its mark; after a claim, before the
 * batch's membership; and so on. With D1 shards, every shard's database is
 * wrapped and their calls counted together: the k-th call is the k-th to any
 * of them, so a fault lands between two shards' writes as well.
 */
export class FaultyD1 {
  /** The wrapped databases, in the order given (the primary first). */
  readonly dbs: D1Database[]
  /** Calls made so far. */
  calls = 0
  #failAt: number | undefined
  /** Calls that were failed. */
  failed = 0

  constructor(reals: D1Database[]) {
    this.dbs = reals.map((real) => this.#wrap(real))
  }

  #wrap(real: D1Database): D1Database {
    const self = this
    return new Proxy(real, {
      get(target, property) {
        const value = Reflect.get(target, property)
        if (property === 'prepare') return (query: string) => faulty(target.prepare(query), self)
        if (property === 'batch') {
          return async (statements: D1PreparedStatement[]) => {
            self.#call('batch')
            return target.batch(statements.map(unwrap))
          }
        }
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
  }

  /** Fails the `k`-th call from now (1: the next one). */
  failCall(k: number): void {
    this.#failAt = this.calls + k
  }

  /** No call fails. */
  heal(): void {
    this.#failAt = undefined
  }

  /** Counts a call; throws when it is the one to fail. */
  check(what: string): void {
    this.#call(what)
  }

  #call(what: string): void {
    this.calls += 1
    if (this.#failAt !== undefined && this.calls === this.#failAt) {
      this.#failAt = undefined
      this.failed += 1
      throw new Error(`D1_ERROR: the model failed this ${what} (network connection lost)`)
    }
  }
}

const INNER = Symbol('inner')

function unwrap(statement: D1PreparedStatement): D1PreparedStatement {
  return (statement as unknown as { [INNER]?: D1PreparedStatement })[INNER] ?? statement
}

/** A statement whose executions count as calls of `d1`, as D1's batch() reads it (`statement`, `params`). */
function faulty(inner: D1PreparedStatement, d1: FaultyD1): D1PreparedStatement {
  const wrapped = {
    [INNER]: inner,
    get statement() {
      return (inner as unknown as { statement: string }).statement
    },
    get params() {
      return (inner as unknown as { params: unknown[] }).params
    },
    bind: (...values: unknown[]) => faulty(inner.bind(...values), d1),
    run: async () => {
      d1.check('run')
      return inner.run()
    },
    all: async () => {
      d1.check('all')
      return inner.all()
    },
    first: async (column?: string) => {
      d1.check('first')
      return column === undefined ? inner.first() : inner.first(column)
    },
    raw: async (options?: { columnNames?: boolean }) => {
      d1.check('raw')
      return inner.raw(options as { columnNames: true })
    },
  }
  return wrapped as unknown as D1PreparedStatement
}
