import { pruneAudit } from '../audit/audit-store.ts'
import type { Config } from '../config.ts'
import { pruneSessions } from '../console/sessions.ts'
import { pruneResolvedDeadLetters } from '../dead-letters/dead-letter-store.ts'
import { pruneDeliveryEvents } from '../delivery/delivery-event-store.ts'
import type { Logger } from '../log.ts'
import { deleteProcessedEventsBefore } from '../materialize/processed.ts'
import { BUCKET_RETENTION_MS, pruneBuckets } from '../metrics/buckets.ts'
import { GAUGES, setGauge } from '../metrics/counters.ts'
import { pruneNotificationContent, pruneSentMessages } from '../notifications/prune.ts'

const DAY_MS = 86_400_000

/** One kind of data the cron prunes: its retention, and the statement that prunes one chunk of it. */
type Pruning = {
  table: string
  days: number
  /** Pruned every minute by design (the charts' rolling buckets): no log line for it. */
  quiet?: boolean
  statement: (db: D1Database, before: string, now: string, limit: number) => D1PreparedStatement
}

/** Every kind of data that ages out, with its retention from the configuration. */
function prunings(config: Config): Pruning[] {
  return [
    {
      table: 'processed_events',
      days: config.PROCESSED_EVENTS_RETENTION_DAYS,
      statement: (db, before, _, limit) => deleteProcessedEventsBefore(db, before, limit),
    },
    {
      table: 'notifications',
      days: config.NOTIFICATION_CONTENT_RETENTION_DAYS,
      statement: pruneNotificationContent,
    },
    {
      table: 'sent_messages',
      days: config.SENT_MESSAGE_RETENTION_DAYS,
      statement: (db, before, _, limit) => pruneSentMessages(db, before, limit),
    },
    {
      table: 'delivery_events',
      days: config.DELIVERY_EVENT_RETENTION_DAYS,
      statement: (db, before, _, limit) => pruneDeliveryEvents(db, before, limit),
    },
    {
      table: 'dead_letters',
      days: config.DEAD_LETTER_RETENTION_DAYS,
      statement: (db, before, _, limit) => pruneResolvedDeadLetters(db, before, limit),
    },
    {
      table: 'audit_log',
      days: config.AUDIT_RETENTION_DAYS,
      statement: (db, before, _, limit) => pruneAudit(db, before, limit),
    },
    // A console session last used two days ago is over however it is configured (its idle time is
    // at most a day): its row only says who was signed in, which the audit trail keeps.
    {
      table: 'console_sessions',
      days: 2,
      statement: (db, before, _, limit) => pruneSessions(db, before, limit),
    },
    // The charts' buckets (src/metrics/buckets.ts) keep a fixed span: what the charts show, and a little more.
    {
      table: 'counter_buckets (minute)',
      days: BUCKET_RETENTION_MS.minute / DAY_MS,
      statement: (db, before, _, limit) => pruneBuckets(db, 'minute', before, limit),
      quiet: true,
    },
    {
      table: 'counter_buckets (hour)',
      days: BUCKET_RETENTION_MS.hour / DAY_MS,
      statement: (db, before, _, limit) => pruneBuckets(db, 'hour', before, limit),
      quiet: true,
    },
  ]
}

/**
 * One run of retention: for each kind of data, at most RETENTION_CHUNK_ROWS
 * of its oldest rows past their retention are pruned; what is left waits for
 * the next run, a minute later. Each chunk is one statement — a delete (or,
 * for notifications, an update) by primary key from a LIMITed search on an
 * index — run on its own rather than in one batch, so each is its own short
 * transaction and D1's single writer serves the queues between them. A run
 * is a handful of D1 queries, far inside the 1,000 an invocation may make.
 *
 * Then the database's size: D1 reports it after every statement
 * (`meta.size_after`); it cannot be read with `PRAGMA page_count`, which D1
 * refuses. It is recorded as the gauge `notify_d1_size_bytes`.
 *
 * A kind whose statement fails does not stop the others; the first failure is
 * thrown at the end so the run shows as failed.
 */
export async function runRetention(env: Env, config: Config, now: Date, log: Logger): Promise<void> {
  const nowIso = now.toISOString()
  let size: number | undefined
  let failure: unknown
  for (const { table, days, statement, quiet } of prunings(config)) {
    const before = new Date(now.getTime() - days * DAY_MS).toISOString()
    try {
      const result = await statement(env.DB, before, nowIso, config.RETENTION_CHUNK_ROWS).run()
      size = result.meta.size_after ?? size
      // Only a run that pruned something says so: six lines a minute of nothing would drown the log.
      if (result.meta.changes > 0 && !quiet)
        log.info('maintenance.retention', { table, before, deleted: result.meta.changes })
    } catch (error) {
      log.error('maintenance.retention-failed', { table, before, error })
      failure ??= error
    }
  }
  size ??= (await env.DB.prepare('SELECT 1').run()).meta.size_after
  if (typeof size === 'number' && size > 0) {
    await setGauge(env.DB, GAUGES.d1Size, {}, size, nowIso).run()
  }
  if (failure !== undefined) throw failure
}
