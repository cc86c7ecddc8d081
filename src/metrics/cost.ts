/**
 * What one invocation asks of the services Cloudflare bills per use: D1
 * statements and the rows they read and wrote (D1's own `meta`), KV
 * operations, and queue operations. Counted by the metered bindings
 * (./metered-d1.ts, ./metered-bindings.ts), logged once per invocation
 * (./invocation.ts), summed per email by `npm run bench`.
 */
export type Cost = {
  /** Requests to D1: a `batch()` is one, and so is a statement run on its own. */
  d1RoundTrips: number
  /** Statements D1 ran, inside batches or not. */
  d1Statements: number
  /** With D1 shards (src/d1/shards.ts), the statements of each shard, the primary first; absent with one database. */
  d1StatementsByShard?: number[]
  /** `meta.rows_read` summed: what D1 bills as rows read. */
  d1RowsRead: number
  /** `meta.rows_written` summed: what D1 bills as rows written (index entries included). */
  d1RowsWritten: number
  /**
   * `meta.duration` summed: milliseconds the database spent executing the
   * statements. One database runs one statement at a time, so this is the
   * share of its single writer the invocation took.
   */
  d1Ms: number
  /** KV keys read: a bulk `get` of n keys is n reads, as KV bills it. */
  kvReads: number
  /** KV puts and deletes (billed alike). */
  kvWrites: number
  /** Queue messages sent (`send`, each of a `sendBatch`): one write each up to 64 KB. */
  queueWrites: number
  /** Queue messages delivered to this invocation: one read each. */
  queueReads: number
  /** Queue messages acknowledged: one delete each. */
  queueDeletes: number
}

/** A cost of nothing yet, to count into. */
export function noCost(): Cost {
  return {
    d1RoundTrips: 0,
    d1Statements: 0,
    d1RowsRead: 0,
    d1RowsWritten: 0,
    d1Ms: 0,
    kvReads: 0,
    kvWrites: 0,
    queueWrites: 0,
    queueReads: 0,
    queueDeletes: 0,
  }
}
