import { pruneAudit } from '../audit/audit-store.ts'
import type { Config } from '../config.ts'
import { pruneSessions } from '../console/sessions.ts'
import { pruneResolvedDeadLetters } from '../dead-letters/dead-letter-store.ts'
import { pruneDeliveryEvents } from '../delivery/delivery-event-store.ts'
import type { Logger } from '../log.ts'
import { deleteLegacyMarksBefore, deleteProcessedEventsBefore } from '../materialize/processed.ts'
import { BUCKET_RETENTION_MS, pruneBuckets } from '../metrics/buckets.ts'
import { GAUGES, setGauge } from '../metrics/counters.ts'
import { pruneBundles } from '../notifications/bundles.ts'
import { pruneNotificationContent, pruneNotificationRows, pruneSentMessages } from '../notifications/prune.ts'
import { deleteOldest } from '../sql.ts'

const DAY_MS = 86_400_000

/** One kind of data the cron prunes: its retention, and the statement that prunes one chunk of it. */
type Pruning = {
  table: string
  days: number
  /** Pruned every minute by design (the charts' rolling buckets): no log line for it. */
  quiet?: boolean
  /** One statement, or the statements of one transaction (the last one's changes are what it pruned). */
  statement: (db: D1Database, before: string, now: string, limit: number) => D1PreparedStatement | D1PreparedStatement[]
}

/** Every kind of data that ages out, with its retention from the configuration. */
function prunings(config: Config): Pruning[] {
  return [
    {
      table: 'processed_marks',
      days: config.PROCESSED_EVENTS_RETENTION_DAYS,
      statement: (db, before, _, limit) => deleteProcessedEventsBefore(db, before, limit),
    },
    // A cancellation outlives any late event of its key as a processed mark outlives a redelivery.
    {
      table: 'cancellations',
      days: config.PROCESSED_EVENTS_RETENTION_DAYS,
      statement: (db, before, _, limit) => deleteOldest(db, 'cancellations', 'key', 'cancelled_at', before, limit),
    },
    // The marks written before they were keyed by event: drained, then an empty search a minute.
    {
      table: 'processed_events (before migration 0022)',
      days: config.PROCESSED_EVENTS_RETENTION_DAYS,
      statement: (db, before, _, limit) => deleteLegacyMarksBefore(db, before, limit),
    },
    {
      table: 'notifications',
      days: config.NOTIFICATION_CONTENT_RETENTION_DAYS,
      statement: pruneNotificationContent,
    },
    // After the content: a notification whose content this run removed may go in the same run. Its
    // delivery events, and its exact message where one is kept, go with it.
    {
      table: 'notifications (rows)',
      days: config.notificationRetentionDays,
      statement: (db, before, _, limit) => pruneNotificationRows(db, before, limit),
    },
    {
      table: 'send_batches',
      days: config.notificationRetentionDays,
      statement: (db, before, _, limit) => pruneBundles(db, before, limit),
    },
    {
      table: 'sent_messages',
      days: config.SENT_MESSAGE_RETENTION_DAYS,
      statement: (db, before, _, limit) => pruneSentMessages(db, before, limit),
    },
    {
      table: 'delivery_events (of no notification)',
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
 * One run of retention: for each kind of data, its oldest rows past their
 * retention are pruned a chunk of RETENTION_CHUNK_ROWS at a time, and while a
 * chunk comes back full another follows, up to RETENTION_MAX_CHUNKS: the
 * pruning keeps pace with a backlog (the first run after a deploy, a burst, a
 * database that grew for a year) instead of falling behind at a fixed rate,
 * and a quiet minute costs one statement per kind. Each chunk is its own
 * short transaction — one delete (or, for notifications' content, an update)
 * by primary key from a LIMITed search on an index; for notifications' rows,
 * the deletes of what belongs to them and then theirs — so D1's single
 * writer serves the queues between chunks. A run is at most RETENTION_MAX_CHUNKS transactions a
 * kind, far inside the 1,000 queries an invocation may make.
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
  const limit = config.RETENTION_CHUNK_ROWS
  let size: number | undefined
  let failure: unknown
  for (const { table, days, statement, quiet } of prunings(config)) {
    const before = new Date(now.getTime() - days * DAY_MS).toISOString()
    let deleted = 0
    let chunks = 0
    try {
      let full = true
      while (full && chunks < config.RETENTION_MAX_CHUNKS) {
        const statements = statement(env.DB, before, nowIso, limit)
        const result = Array.isArray(statements)
          ? ((await env.DB.batch(statements)).at(-1) as D1Result)
          : await statements.run()
        chunks += 1
        size = result.meta.size_after ?? size
        deleted += result.meta.changes
        full = result.meta.changes >= limit
      }
    } catch (error) {
      log.error('maintenance.retention-failed', { table, before, deleted, error })
      failure ??= error
    }
    // Only a run that pruned something says so: a line a kind a minute of nothing would drown the log.
    if (deleted > 0 && !quiet) log.info('maintenance.retention', { table, before, deleted, chunks })
  }
  size ??= (await env.DB.prepare('SELECT 1').run()).meta.size_after
  if (typeof size === 'number' && size > 0) {
    await setGauge(env.DB, GAUGES.d1Size, {}, size, nowIso).run()
  }
  if (failure !== undefined) throw failure
}
