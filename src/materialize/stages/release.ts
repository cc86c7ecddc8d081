import { releaseWaiting } from '../release-waiting.ts'
import type { EventsRun } from '../run.ts'
import type { Written } from './write.ts'

/**
 * Stage 6: the contacts this batch wrote release the notifications that were
 * waiting for them (rendered, `pending`, enqueued). A failure here fails no
 * event — the contacts are written — and the cron's sweep releases them
 * within a minute instead.
 */
export async function releaseStage(run: EventsRun, written: readonly Written[]): Promise<void> {
  const userIds = written.flatMap((item) =>
    item.type === 'record' && item.plan.contact ? [item.plan.contact.userId] : [],
  )
  if (userIds.length === 0) return
  try {
    await releaseWaiting(run.env, run.config, userIds, run.now, run.log)
  } catch (error) {
    run.log.warn('materialize.release-failed', { error })
  }
}
