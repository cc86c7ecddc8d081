/**
 * The series of the console's charts, each a sum of counters the pipeline
 * already keeps (./counters.ts): which counter, which of its label values,
 * and what one unit of it is. The cron buckets exactly these counters over
 * time (./buckets.ts); the overview draws and rates them.
 */
import { FINAL_STATUSES } from '../notifications/status.ts'
import { COUNTERS } from './counters.ts'

/** The name of a charted series. */
export type SeriesKey =
  | 'accepted'
  | 'sent'
  | 'failed'
  | 'suppressed'
  | 'opted-out'
  | 'dead-lettered'
  | 'delivered'
  | 'bounced'
  | 'complained'

/** One charted series: the counter it sums, and the label values it takes (`only`) or leaves out (`except`). */
export type Series = {
  key: SeriesKey
  /** How the console names it. */
  label: string
  /** What one is: the unit of its axis. */
  unit: string
  counter: string
  field?: string
  only?: readonly string[]
  except?: readonly string[]
}

/** Every series, in the order the charts show them: the pipeline's own work, then the providers' reports. */
export const SERIES: readonly Series[] = [
  // Every event recorded, whatever it asked for; a duplicate or a dead letter is not accepted.
  {
    key: 'accepted',
    label: 'Events accepted',
    unit: 'events',
    counter: COUNTERS.events,
    field: 'outcome',
    except: ['skipped-duplicate', 'dead-lettered'],
  },
  { key: 'sent', label: 'Sent', unit: 'emails', counter: COUNTERS.notifications, field: 'status', only: ['sent'] },
  {
    key: 'failed',
    label: 'Failed',
    unit: 'notifications',
    counter: COUNTERS.notifications,
    field: 'status',
    only: ['failed'],
  },
  {
    key: 'suppressed',
    label: 'Suppressed',
    unit: 'notifications',
    counter: COUNTERS.notifications,
    field: 'status',
    only: ['suppressed'],
  },
  {
    key: 'opted-out',
    label: 'Opted out',
    unit: 'notifications',
    counter: COUNTERS.notifications,
    field: 'status',
    only: ['opted-out'],
  },
  { key: 'dead-lettered', label: 'Dead-lettered', unit: 'messages', counter: COUNTERS.deadLetters },
  {
    key: 'delivered',
    label: 'Delivered',
    unit: 'reports',
    counter: COUNTERS.deliveries,
    field: 'status',
    only: ['delivered'],
  },
  {
    key: 'bounced',
    label: 'Bounced',
    unit: 'reports',
    counter: COUNTERS.deliveries,
    field: 'status',
    only: ['bounced'],
  },
  {
    key: 'complained',
    label: 'Complained',
    unit: 'reports',
    counter: COUNTERS.deliveries,
    field: 'status',
    only: ['complained'],
  },
]

/** The series a counter row counts in, if any. */
export function seriesOf(name: string, labels: Record<string, string>): SeriesKey | undefined {
  for (const series of SERIES) {
    if (series.counter !== name) continue
    const value = series.field ? (labels[series.field] ?? '') : ''
    if (series.only && !series.only.includes(value)) continue
    if (series.except?.includes(value)) continue
    return series.key
  }
  return undefined
}

const quoted = (value: string) => `'${value.replaceAll("'", "''")}'`
const list = (values: readonly string[]) => values.map(quoted).join(', ')

/**
 * Counted in buckets though not charted: every final status a notification
 * reaches, for the overview's "last 24 h" card (digested, throttled,
 * superseded and undeliverable beside the charted four). Summed from the
 * hour buckets, so the card reads no notification row.
 */
export const TALLIED: readonly Pick<Series, 'counter' | 'field' | 'only'>[] = [
  { counter: COUNTERS.notifications, field: 'status', only: FINAL_STATUSES },
]

/**
 * The SQL condition, over a table's `name` and `labels` columns (prefixed by
 * `table`), of the counter rows some series counts or TALLIED names: the cron
 * buckets only these. Built from the constants above, never from input.
 */
export function bucketedCondition(table: string): string {
  const conditions = new Map<string, string[]>()
  for (const series of [...SERIES, ...TALLIED] as Pick<Series, 'counter' | 'field' | 'only' | 'except'>[]) {
    const label = series.field ? `json_extract(${table}.labels, '$.${series.field}')` : ''
    const parts = [
      ...(series.only ? [`${label} IN (${list(series.only)})`] : []),
      ...(series.except ? [`${label} NOT IN (${list(series.except)})`] : []),
    ]
    const clause = parts.length > 0 ? parts.join(' AND ') : 'true'
    conditions.set(series.counter, [...(conditions.get(series.counter) ?? []), clause])
  }
  return [...conditions]
    .map(([counter, clauses]) => `(${table}.name = ${quoted(counter)} AND (${clauses.join(' OR ')}))`)
    .join(' OR ')
}
