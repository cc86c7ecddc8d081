import { PipelineError } from '../../errors.ts'
import { markEnqueued } from '../../notifications/stuck.ts'
import { DispatchMessageSchema } from '../../queue/dispatch-message.ts'
import { type Outgoing, sendAll } from '../../queue/send.ts'
import type { DispatchRun, Later } from '../run.ts'

/**
 * Notifications that are not due yet, and those to try again, go back on the
 * queue with their delay, each message naming the due time it was sent for.
 * If that send fails the message is retried; a retry's row is already
 * `pending` at its new time, so the old message comes back stale and the cron
 * enqueues the new time once it has passed.
 */
export async function requeueStage(
  run: DispatchRun,
  later: readonly Later[],
  retries: readonly Later[],
  orphans: readonly Outgoing[],
): Promise<void> {
  const all = [...later, ...retries]
  if (all.length === 0 && orphans.length === 0) return
  try {
    await sendAll(run.env.DISPATCH, [...all.map((entry) => entry.outgoing), ...orphans])
    for (const { message } of all) run.ack(message)
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `notify-dispatch: ${(cause as Error).message}`, { cause })
    for (const { message } of all) run.fail(message, error)
    return
  }
  // A retry's mark stamped its row already, in the same write as its new time.
  await recordEnqueued(run, later)
}

/**
 * Stamps when a message for each of these notifications went back on the
 * queue, so that the cron, which re-enqueues a due notification with no
 * recent message, does not start a second one beside it (a held decision
 * asks again every 30 s). Not stamped, the cost is a duplicate message,
 * which its claim makes harmless: logged, not failed.
 */
async function recordEnqueued(run: DispatchRun, later: readonly Later[]): Promise<void> {
  const ids = later.flatMap(({ outgoing }) => {
    const parsed = DispatchMessageSchema.safeParse(outgoing.body)
    return parsed.success ? [parsed.data.notificationId] : []
  })
  if (ids.length === 0) return
  try {
    await markEnqueued(run.env.DB, ids, run.nowIso).run()
  } catch (error) {
    run.log.warn('dispatch.enqueued-not-recorded', { count: ids.length, code: 'NTF_DEPENDENCY_FAILED', error })
  }
}
