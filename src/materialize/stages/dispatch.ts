import { dispatchFor } from '../../dispatch/message.ts'
import { PipelineError } from '../../errors.ts'
import { type Outgoing, sendAll } from '../../queue/send.ts'
import type { BatchRun, Entry } from '../batch.ts'

/**
 * Stage 5: one `notify-dispatch` message per pending notification just
 * written, and again for pending ones of events found already processed (the
 * notification row is the outbox of the dispatch queue). If the send fails,
 * those events are retried: committed ones come back as duplicates and
 * dispatch again.
 */
export async function dispatchStage(run: BatchRun): Promise<void> {
  const dispatches = new Map<Entry, Outgoing[]>()
  for (const entry of run.open()) {
    const { plan } = entry
    if (plan?.type === 'duplicate') {
      dispatches.set(
        entry,
        plan.redispatch.map((row) => dispatchFor(row.id, row.scheduledAt, run.now)),
      )
    } else if (plan?.type === 'record' && entry.written?.committed) {
      const pending = plan.notifications.filter((row) => row.status === 'pending')
      dispatches.set(
        entry,
        pending.map((row) => dispatchFor(row.id, row.scheduledAt, run.now)),
      )
    }
  }
  const outgoing = [...dispatches.values()].flat()
  if (outgoing.length === 0) return
  try {
    await sendAll(run.env.DISPATCH, outgoing)
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `notify-dispatch: ${(cause as Error).message}`, { cause })
    for (const [entry, list] of dispatches) {
      if (list.length > 0) run.fail(entry, error, { messageId: entry.message.id, stage: 'dispatch' })
    }
  }
}
