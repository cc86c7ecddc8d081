/**
 * What Cloudflare allows one invocation of this Worker (a request, a queue
 * batch, a cron run), as its documentation states it for the Workers Paid
 * plan. Work that grows with its input is cut to fit these; the tests count
 * what an invocation does and compare it with them. Cloudflare Queues' own
 * limits (100 messages and 256 KB per `sendBatch`, 128 KB per message) are in
 * `@notify-edge/contracts`, shared with the bridge.
 */

/**
 * Workers limits, https://developers.cloudflare.com/workers/platform/limits/
 * ("Account plan limits", "Memory", "Subrequests").
 */
export const WORKER_LIMITS = {
  /**
   * Subrequests per invocation: a `fetch()`, and every call to D1, KV, Queues
   * or R2. The page gives 1,000 for Workers Paid (later revisions raise it to
   * 10,000); the lower figure is the one D1 and KV state per invocation too.
   */
  subrequests: 1000,
  /** Memory of one isolate, shared by every invocation it runs. */
  memoryBytes: 128 * 1024 * 1024,
} as const

/**
 * D1 limits, https://developers.cloudflare.com/d1/platform/limits/. A
 * `batch()` is one call: the binding sends its statements in one request to
 * D1 (workerd, src/cloudflare/internal/d1-api.ts), so it is one of the
 * queries per invocation; the limits of a statement apply to each statement
 * inside a batch ("Batch limits" on the same page).
 */
export const D1_LIMITS = {
  /** Queries per Worker invocation, Workers Paid ("read subrequest limits"). */
  queriesPerInvocation: 1000,
  /** Maximum bound parameters per query. */
  boundParameters: 100,
  /** Maximum SQL statement length, in bytes. */
  statementBytes: 100_000,
  /** Maximum string, BLOB or table row size, in bytes. */
  valueBytes: 2_000_000,
} as const

/**
 * KV limits, https://developers.cloudflare.com/kv/platform/limits/: operations
 * per Worker invocation (a bulk `get` of up to 100 keys is one).
 */
export const KV_LIMITS = { operationsPerInvocation: 1000 } as const

/**
 * Queues limits, https://developers.cloudflare.com/queues/platform/limits/
 * ("Per-queue message throughput"): past it a queue answers 429, so ingest
 * spreads notify-events over EVENTS_QUEUE_SHARDS queues.
 */
export const QUEUE_LIMITS = { messagesPerSecond: 5000 } as const
