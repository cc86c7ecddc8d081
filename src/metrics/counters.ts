/** Names of the counters kept in D1 table `counters` (notifications, dead letters and deliveries by trigger). */
export const COUNTERS = {
  events: 'notify_events_total',
  notifications: 'notify_notifications_total',
  deadLettersOpen: 'notify_dead_letters_open',
  deadLettersUnstorable: 'notify_dead_letters_unstorable_total',
  deadLetters: 'notify_dead_letters_total',
  deliveries: 'notify_deliveries_total',
  digests: 'notify_digests_total',
  authFailures: 'notify_auth_failures_total',
} as const

/** Names of the gauges: kept in D1 table `gauges`, but the transports', which `/metrics` reads from their own tables. */
export const GAUGES = {
  consumerLag: 'notify_consumer_lag_seconds',
  transportPaused: 'notify_transport_paused',
  transportState: 'notify_transport_state',
  transportSentLastHour: 'notify_transport_sent_last_hour',
  d1Size: 'notify_d1_size_bytes',
  maintenanceLastRun: 'notify_maintenance_last_run_timestamp_seconds',
} as const

/**
 * D1's largest database (Workers Paid), in bytes: Cloudflare says "10 GB", read
 * here as 10^9 bytes a GB, the smaller reading, so a warning comes early
 * rather than late. Past it every write fails.
 */
export const D1_SIZE_LIMIT_BYTES = 10_000_000_000

/** Canonical label JSON: keys sorted, as the triggers of migration 0004 write them. */
export function canonicalLabels(labels: Record<string, string>): string {
  return JSON.stringify(Object.fromEntries(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b))))
}

/** Sets a gauge. Parameters: name, canonical labels JSON, value, now. */
export function setGauge(
  db: D1Database,
  name: string,
  labels: Record<string, string>,
  value: number,
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO gauges (name, labels, value, updated_at) VALUES (?1, ?2, ?3, ?4)
       ON CONFLICT (name, labels) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
    )
    .bind(name, canonicalLabels(labels), value, now)
}

/** Counter increments gathered over a batch, written as one statement per label set. */
export class CounterBatch {
  readonly #values = new Map<string, { name: string; labels: string; value: number }>()

  /** Adds `value` to counter `name` with `labels`. */
  add(name: string, labels: Record<string, string>, value = 1): void {
    const canonical = canonicalLabels(labels)
    const key = `${name}\n${canonical}`
    const entry = this.#values.get(key)
    if (entry) entry.value += value
    else this.#values.set(key, { name, labels: canonical, value })
  }

  /**
   * The statements that apply the increments gathered so far, which are then
   * forgotten: increments added afterwards come out of the next call.
   */
  drain(db: D1Database): D1PreparedStatement[] {
    const statements = [...this.#values.values()].map((entry) =>
      incrementCounter(db, entry.name, entry.labels, entry.value),
    )
    this.#values.clear()
    return statements
  }
}

/** An event as its processed mark is keyed: its id and idempotency key. */
export type EventKey = { eventId: string; idempotencyKey: string }

/**
 * Adds to a counter one for each of `events` whose `processed_marks` row
 * carries `claim`: the events this batch wrote, whichever of them committed.
 * One statement (and one row written) for a batch's events of one label set,
 * where a guarded increment per event wrote a row each.
 */
export function incrementClaimed(
  db: D1Database,
  name: string,
  labels: string,
  events: readonly EventKey[],
  claim: string,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO counters (name, labels, value)
       SELECT ?1, ?2, count(*) FROM processed_marks
       WHERE (event_id, idempotency_key) IN
             (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?3))
         AND claim = ?4
       HAVING count(*) > 0
       ON CONFLICT (name, labels) DO UPDATE SET value = value + excluded.value`,
    )
    .bind(name, labels, JSON.stringify(events.map((event) => [event.eventId, event.idempotencyKey])), claim)
}

/**
 * Adds to a counter. Parameters: name, canonical labels JSON, increment.
 */
export function incrementCounter(db: D1Database, name: string, labels: string, value: number): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO counters (name, labels, value) VALUES (?1, ?2, ?3)
       ON CONFLICT (name, labels) DO UPDATE SET value = value + excluded.value`,
    )
    .bind(name, labels, value)
}
