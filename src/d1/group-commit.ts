/** D1's error when SQLite could not take its lock: the transaction did not run. */
const LOCKED = /SQLITE_BUSY|database is locked/

/** The waits before each further try of a write D1 refused as locked, in ms: under 1.1 s in all. */
const LOCKED_RETRY_MS = [50, 200, 800]

/** One caller's statements waiting for the next group, and what they ask to be tallied. */
type Pending<T> = {
  statements: D1PreparedStatement[]
  tallies: readonly T[]
  resolve: (results: D1Result[]) => void
  reject: (error: unknown) => void
}

/**
 * Writes D1 statements with group commit: the statements of callers that
 * arrive while a write is in flight go to D1 together in the next batch, so
 * many small writes cost a few round trips instead of one each, and each is
 * still written as soon as the database is free (never held back for the
 * others). The dispatch writes its marks through it: a batch of sends costs a
 * few round trips, and each result is written as its send finishes. Each
 * caller gets the results of its own statements, so a token-guarded mark
 * still tells whether it applied. A group that fails is written again caller
 * by caller: one write that cannot go through never fails the others.
 *
 * A caller may hand tallies beside its statements (the dispatch: the
 * notifications its marks count, src/notifications/counted.ts); `tally`
 * turns a group's tallies into the statements that apply them, written last
 * in the group's transaction — one set for the group, not one per caller —
 * and a caller's own when it is written alone. A caller gets the results of
 * its own statements only.
 */
export class GroupCommit<T = never> {
  readonly #db: D1Database
  readonly #tally: (tallies: readonly T[]) => D1PreparedStatement[]
  #waiting: Pending<T>[] = []
  #writing = false

  constructor(db: D1Database, tally: (tallies: readonly T[]) => D1PreparedStatement[] = () => []) {
    this.#db = db
    this.#tally = tally
  }

  /** Writes these statements (in order, in one transaction with whatever shares their group), and applies `tallies` with them. */
  write(statements: D1PreparedStatement[], tallies: readonly T[] = []): Promise<D1Result[]> {
    const { promise, resolve, reject } = Promise.withResolvers<D1Result[]>()
    this.#waiting.push({ statements, tallies, resolve, reject })
    void this.#drain()
    return promise
  }

  async #drain(): Promise<void> {
    if (this.#writing) return
    this.#writing = true
    try {
      while (this.#waiting.length > 0) await this.#writeGroup(this.#waiting.splice(0))
    } finally {
      this.#writing = false
    }
  }

  async #writeGroup(group: Pending<T>[]): Promise<void> {
    if (group.length > 1) {
      try {
        const results = await this.#db.batch([
          ...group.flatMap((pending) => pending.statements),
          ...this.#tally(group.flatMap((pending) => pending.tallies)),
        ])
        let at = 0
        for (const pending of group) {
          pending.resolve(results.slice(at, at + pending.statements.length))
          at += pending.statements.length
        }
        return
      } catch {
        // One of them may be what fails: each is tried alone below, and only its own caller sees the error.
      }
    }
    for (const pending of group) await this.#writeAlone(pending)
  }

  /**
   * One caller's statements in a transaction of their own. A write D1 refused
   * because SQLite could not take its lock did not run at all, so it is tried
   * again after a short wait: a mark that records a send already made must
   * not be lost to a moment's contention (its notification would be sent
   * again once its lease ends). Any other failure goes to the caller at once.
   */
  async #writeAlone(pending: Pending<T>): Promise<void> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        const results = await this.#db.batch([...pending.statements, ...this.#tally(pending.tallies)])
        pending.resolve(results.slice(0, pending.statements.length))
        return
      } catch (error) {
        const wait = LOCKED_RETRY_MS[attempt]
        if (wait === undefined || !LOCKED.test(String((error as Error | undefined)?.message))) {
          pending.reject(error)
          return
        }
        await scheduler.wait(wait)
      }
    }
  }
}
