import { noCost } from './cost.ts'
import { meteredD1 } from './metered-d1.ts'

/**
 * The D1 binding with every round trip counted: a `batch()` is one, and so is
 * a statement run on its own (`run`, `all`, `first`, `raw`). The consumers log
 * the count per queue batch, so that what the benchmark reports is measured,
 * not derived from how the code is meant to behave. A round trip is also what
 * Cloudflare counts against an invocation's D1 queries: the binding sends a
 * whole batch as one request (src/platform-limits.ts).
 */
export function countRoundTrips(db: D1Database): { db: D1Database; roundTrips: () => number } {
  const cost = noCost()
  return { db: meteredD1(db, cost), roundTrips: () => cost.d1RoundTrips }
}
