/**
 * The charted counters over time, in D1 table `counter_buckets` (migration
 * 0015): what each counter of ./series.ts gained per minute and per hour —
 * its series, and the notifications' final statuses it tallies.
 *
 * Written by the cron once a minute, not by the pipeline: each run puts what
 * every charted counter gained since the run before into the minute that
 * just ended, marks the counters as bucketed, and sums the previous hour into
 * its hour bucket. So the rows written depend on how many counters moved in a
 * minute, not on how many emails went out: at most one bucket row and one
 * mark per moved counter a minute, and one hour row per counter an hour
 * (docs/cost.md). A bucket row keyed (name, labels, start) written by the
 * counting triggers themselves would have cost one more row written for
 * every counted change — each event, each email sent, each delivery report.
 *
 * The price is that a gain is dated by the run that bucketed it: to the
 * minute while the cron runs every minute, and a run that was missed puts
 * its minutes' gains into the next one. The gain since the last run is read
 * live by the overview (`bucketReads`), so the current minute is never empty.
 */
import { bucketedCondition } from './series.ts'

const MINUTE_MS = 60_000
const HOUR_MS = 3_600_000

/** A bucket's width. */
export type Width = 'minute' | 'hour'

/**
 * How long buckets are kept: minute buckets for the chart's hour and the
 * hour the rollup still reads, with an hour to spare; hour buckets for the
 * chart's 7 days and the day they begin in.
 */
export const BUCKET_RETENTION_MS: Record<Width, number> = { minute: 3 * HOUR_MS, hour: 8 * 24 * HOUR_MS }

/** The start of the minute `time` (ms) falls in, as the buckets store it. */
export function minuteStart(time: number): string {
  return new Date(Math.floor(time / MINUTE_MS) * MINUTE_MS).toISOString()
}

/** The start of the hour `time` (ms) falls in, as the buckets store it. */
export function hourStart(time: number): string {
  return new Date(Math.floor(time / HOUR_MS) * HOUR_MS).toISOString()
}

/** What each bucketed counter (charted or tallied) gained since it was last bucketed: FROM … WHERE, over `counters c` and `counter_marks m`. */
const GAINED = `FROM counters c LEFT JOIN counter_marks m ON m.name = c.name AND m.labels = c.labels
  WHERE (${bucketedCondition('c')}) AND c.value <> coalesce(m.value, 0)`

/**
 * The cron's statements for a run at `now`, to run as one D1 batch — one
 * transaction, so that no increment lands between a counter's gain being
 * bucketed and its mark being moved:
 * 1. each charted counter's gain since its mark goes into the minute that
 *    just ended (added to it, should a run of the same minute have been first);
 * 2. its mark becomes its value;
 * 3. the previous hour's minute buckets are summed into its hour buckets,
 *    written only where the sum differs — once an hour, in practice: the
 *    first run of an hour completes the one before.
 */
export function bucketStatements(db: D1Database, now: Date): D1PreparedStatement[] {
  const time = now.getTime()
  return [
    db
      .prepare(
        `INSERT INTO counter_buckets (width, start, name, labels, value)
         SELECT 'minute', ?1, c.name, c.labels, c.value - coalesce(m.value, 0) ${GAINED}
         ON CONFLICT (width, start, name, labels) DO UPDATE SET value = value + excluded.value`,
      )
      .bind(minuteStart(time - MINUTE_MS)),
    db.prepare(
      `INSERT INTO counter_marks (name, labels, value)
       SELECT c.name, c.labels, c.value ${GAINED}
       ON CONFLICT (name, labels) DO UPDATE SET value = excluded.value`,
    ),
    db
      .prepare(
        `INSERT INTO counter_buckets (width, start, name, labels, value)
         SELECT 'hour', ?1, name, labels, sum(value) FROM counter_buckets
         WHERE width = 'minute' AND start >= ?1 AND start < ?2
         GROUP BY name, labels
         ON CONFLICT (width, start, name, labels) DO UPDATE SET value = excluded.value
         WHERE value <> excluded.value`,
      )
      .bind(hourStart(time - HOUR_MS), hourStart(time)),
  ]
}

/**
 * Deletes at most `limit` of the oldest buckets of `width` that start before
 * `before` (retention, src/maintenance/retention.ts). Parameters: width, before, limit.
 */
export function pruneBuckets(db: D1Database, width: Width, before: string, limit: number): D1PreparedStatement {
  return db
    .prepare(
      `DELETE FROM counter_buckets WHERE (width, start, name, labels) IN
         (SELECT width, start, name, labels FROM counter_buckets WHERE width = ?1 AND start < ?2 ORDER BY start LIMIT ?3)`,
    )
    .bind(width, before, limit)
}

/** A bucket row as the overview reads it; the live gain has no start (it is now's). */
export type BucketRow = { start?: string; name: string; labels: string; value: number }

/**
 * What the overview reads at `now`, three statements of one batch: the minute
 * buckets since the previous hour began (the last 60 minutes, and the hours
 * not yet summed), the hour buckets of the last 7 days, and each charted
 * counter's gain since the cron's last run (the current minute). Range reads
 * on the buckets' key and one pass over `counters`: no scan of notifications.
 */
export function bucketReads(db: D1Database, now: Date): D1PreparedStatement[] {
  const time = now.getTime()
  return [
    db
      .prepare(`SELECT start, name, labels, value FROM counter_buckets WHERE width = 'minute' AND start >= ?1`)
      .bind(hourStart(time - HOUR_MS)),
    db
      .prepare(`SELECT start, name, labels, value FROM counter_buckets WHERE width = 'hour' AND start >= ?1`)
      .bind(hourStart(time - 167 * HOUR_MS)),
    db.prepare(`SELECT c.name, c.labels, c.value - coalesce(m.value, 0) AS value ${GAINED}`),
  ]
}
