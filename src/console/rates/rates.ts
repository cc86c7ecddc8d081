/**
 * The rates that decide whether mail keeps reaching inboxes, from a span's
 * totals (../charts/activity-data.ts), and how each stands against the
 * published limits (./thresholds.ts).
 */
import type { SeriesKey } from '../../metrics/series.ts'
import { type Limit, type LimitedRate, limitsOf } from './thresholds.ts'

/** A rate the console shows. */
export type RateKey = 'delivery' | LimitedRate

/**
 * A rate: `count` of `of`, and their quotient — or null, with `missing` saying
 * why: nothing to rate, or emails sent but no report about any of them yet (a
 * transport that has not reported is not a 0 % delivery rate).
 */
export type Rate = {
  key: RateKey
  count: number
  of: number
  value: number | null
  missing?: 'none sent' | 'none delivered' | 'no reports'
}

/**
 * How a rate stands: `over` at or past a published limit (`past` lists each,
 * lowest first), `near` at half the lowest or more — our margin, not a
 * provider's — and `ok` below that or with no limit published.
 */
export type Standing = { level: 'ok' | 'near' | 'over'; past: Limit[]; lowest?: Limit }

/**
 * A span's three rates. Delivery and bounce are of the emails sent; the
 * complaint rate is of those delivered, as Google and Yahoo reckon spam
 * against mail that reached the inbox (Yahoo: "calculated in our system based
 * on mail delivered to the inbox") — delivered is the nearest we know.
 */
export function ratesOf(totals: Record<SeriesKey, number>): Rate[] {
  const reported = totals.delivered + totals.bounced + totals.complained > 0
  const ofSent = (key: RateKey, count: number): Rate => {
    if (totals.sent === 0) return { key, count, of: 0, value: null, missing: 'none sent' }
    if (!reported) return { key, count, of: totals.sent, value: null, missing: 'no reports' }
    return { key, count, of: totals.sent, value: count / totals.sent }
  }
  const complaint: Rate =
    totals.delivered === 0
      ? { key: 'complaint', count: totals.complained, of: 0, value: null, missing: 'none delivered' }
      : {
          key: 'complaint',
          count: totals.complained,
          of: totals.delivered,
          value: totals.complained / totals.delivered,
        }
  return [ofSent('delivery', totals.delivered), ofSent('bounce', totals.bounced), complaint]
}

/** How `rate` stands against the published limits of its kind of rate. */
export function standingOf(rate: Rate): Standing {
  if (rate.key === 'delivery' || rate.value === null) return { level: 'ok', past: [] }
  const limits = limitsOf(rate.key)
  const lowest = limits[0]
  const value = rate.value
  const past = limits.filter((limit) => value >= limit.limit)
  if (past.length > 0) return { level: 'over', past, lowest }
  return { level: lowest && value >= lowest.limit / 2 ? 'near' : 'ok', past, lowest }
}

/** A fraction as a percentage with two decimals: "0.25 %". */
export function percent(value: number): string {
  return `${(value * 100).toFixed(2)} %`
}
