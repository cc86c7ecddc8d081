import { configOf } from '../config.ts'
import type { Logger } from '../log.ts'
import { deleteProcessedEventsBefore } from '../materialize/processed.ts'

const DAY_MS = 86_400_000

/**
 * The cron trigger's work: retention of processed-event keys. A failure is
 * logged and thrown, so the invocation shows as failed and the next tick
 * tries again; nothing here loses data that is still needed.
 */
export async function runMaintenance(env: Env, now: Date, log: Logger): Promise<void> {
  const config = configOf(env)
  const before = new Date(now.getTime() - config.PROCESSED_EVENTS_RETENTION_DAYS * DAY_MS).toISOString()
  const result = await deleteProcessedEventsBefore(env.DB, before).run()
  log.info('maintenance.retention', { table: 'processed_events', before, deleted: result.meta.changes })
}
