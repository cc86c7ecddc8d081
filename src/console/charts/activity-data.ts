/**
 * The overview's buckets (src/metrics/buckets.ts) as the charts and rates use
 * them: per minute for the last hour and per hour for the last 7 days, each
 * bucket's gains by series (src/metrics/series.ts) and kind.
 */
import { type BucketRow, hourStart, minuteStart } from '../../metrics/buckets.ts'
import { COUNTERS } from '../../metrics/counters.ts'
import { SERIES, type SeriesKey, seriesOf } from '../../metrics/series.ts'
import { FINAL_STATUSES } from '../../notifications/status.ts'

const MINUTE_MS = 60_000
const HOUR_MS = 3_600_000

/** What one series gained in one bucket for one kind ('' for a series without kinds: events, dead letters). */
export type Gain = { series: SeriesKey; kind: string; value: number }

/** The gains of one width of bucket: the starts in order, and each start's gains. */
export type Buckets = { starts: string[]; gains: Map<string, Gain[]> }

/** A final status of a notification. */
export type Outcome = (typeof FINAL_STATUSES)[number]

/**
 * The overview's activity: the last 60 minutes and the last 168 hours, the
 * current ones included; and how many notifications reached each final
 * status in the last 24 of those hours.
 */
export type Activity = { minutes: Buckets; hours: Buckets; day: Map<Outcome, number> }

/** Each series at zero. */
export function zeroes(): Record<SeriesKey, number> {
  return Object.fromEntries(SERIES.map((series) => [series.key, 0])) as Record<SeriesKey, number>
}

/** The starts of `count` buckets of `step` ms ending with the one `now` is in. */
function startsOf(now: number, count: number, step: number, start: (time: number) => string): string[] {
  return Array.from({ length: count }, (_, index) => start(now - (count - 1 - index) * step))
}

/** Sums values by (start, counter row). */
function sumInto(target: Map<string, number>, start: string, row: BucketRow): void {
  const key = `${start}\n${row.name}\n${row.labels}`
  target.set(key, (target.get(key) ?? 0) + Number(row.value))
}

/** Counter rows keyed `start \n name \n labels` as gains by start, for the starts kept. */
function gainsOf(values: Map<string, number>, starts: readonly string[]): Map<string, Gain[]> {
  const gains = new Map<string, Gain[]>(starts.map((start) => [start, []]))
  for (const [key, value] of values) {
    const [start = '', name = '', labels = '{}'] = key.split('\n')
    const list = gains.get(start)
    if (!list || value === 0) continue
    const parsed = JSON.parse(labels) as Record<string, string>
    const series = seriesOf(name, parsed)
    if (series) list.push({ series, kind: parsed.kind ?? '', value })
  }
  return gains
}

/**
 * The activity at `now` from the three reads of `bucketReads`. A minute is
 * its bucket; the current minute is the gain since the cron's last run. An
 * hour is its hour bucket once the cron summed it, else the sum of its minute
 * buckets (the current hour, and the one before until the cron's first run
 * of this hour); the current hour counts the live gain too.
 */
export function activityOf(
  reads: { minutes: BucketRow[]; hours: BucketRow[]; live: BucketRow[] },
  now: Date,
): Activity {
  const time = now.getTime()
  const thisMinute = minuteStart(time)
  const thisHour = hourStart(time)
  const minutes = new Map<string, number>()
  const fromMinutes = new Map<string, number>()
  for (const row of reads.minutes) {
    sumInto(minutes, row.start ?? thisMinute, row)
    sumInto(fromMinutes, hourStart(Date.parse(row.start ?? thisMinute)), row)
  }
  const hours = new Map<string, number>()
  for (const row of reads.hours) sumInto(hours, row.start ?? thisHour, row)
  // An hour the cron has not summed yet: its minutes.
  for (const [key, value] of fromMinutes) if (!hours.has(key)) hours.set(key, value)
  for (const row of reads.live) {
    sumInto(minutes, thisMinute, row)
    sumInto(hours, thisHour, row)
  }
  const minuteStarts = startsOf(time, 60, MINUTE_MS, minuteStart)
  const hourStarts = startsOf(time, 168, HOUR_MS, hourStart)
  return {
    minutes: { starts: minuteStarts, gains: gainsOf(minutes, minuteStarts) },
    hours: { starts: hourStarts, gains: gainsOf(hours, hourStarts) },
    day: outcomesOf(hours, new Set(hourStarts.slice(-24))),
  }
}

/** The notifications that reached each final status in the hours of `starts`, over every kind and channel. */
function outcomesOf(values: Map<string, number>, starts: ReadonlySet<string>): Map<Outcome, number> {
  const outcomes = new Map<Outcome, number>()
  for (const [key, value] of values) {
    const [start = '', name = '', labels = '{}'] = key.split('\n')
    if (name !== COUNTERS.notifications || !starts.has(start) || value === 0) continue
    const status = (JSON.parse(labels) as { status?: string }).status as Outcome
    if (FINAL_STATUSES.includes(status)) outcomes.set(status, (outcomes.get(status) ?? 0) + value)
  }
  return outcomes
}

/** Each series' values, one a bucket in the order of `starts`, summed over kinds. */
export function seriesValues(buckets: Buckets): Record<SeriesKey, number[]> {
  const values = Object.fromEntries(SERIES.map((series) => [series.key, buckets.starts.map(() => 0)])) as Record<
    SeriesKey,
    number[]
  >
  buckets.starts.forEach((start, index) => {
    for (const gain of buckets.gains.get(start) ?? []) (values[gain.series][index] as number) += gain.value
  })
  return values
}

/** Each kind's totals over the last `count` buckets, and every kind's together under ''. */
export function totalsByKind(buckets: Buckets, count: number): Map<string, Record<SeriesKey, number>> {
  const totals = new Map<string, Record<SeriesKey, number>>([['', zeroes()]])
  for (const start of buckets.starts.slice(-count)) {
    for (const gain of buckets.gains.get(start) ?? []) {
      const all = totals.get('') as Record<SeriesKey, number>
      all[gain.series] += gain.value
      if (!gain.kind) continue
      const kind = totals.get(gain.kind) ?? zeroes()
      kind[gain.series] += gain.value
      totals.set(gain.kind, kind)
    }
  }
  return totals
}
