import { dispatchFor } from '../../dispatch/message.ts'
import { PipelineError } from '../../errors.ts'
import { type Outgoing, sendAll } from '../../queue/send.ts'
import type { BatchRun, Entry } from '../batch.ts'

/**
 * Stage 5, enqueue: one `notify-dispatch` message per pending notification just
 * written and per digest just opened (for its close), and again for pending ones of events found already processed (the
 * notification row is the outbox of the dispatch queue). If the send fails,
 * those events are retried: committed ones come back as duplicates and
 * dispatch again.
 */
export async function enqueueStage(run: BatchRun): Promise<void> {
  const dispatches = new Map<Entry, Outgoing[]>()
  for (const entry of run.open()) {
    const { plan } = entry
    if (plan?.type === 'duplicate') {
      dispatches.set(
        entry,
        plan.redispatch.map((row) => dispatchFor(row.id, row.scheduledAt, run.now)),
      )
    } else if (plan?.type === 'record' && entry.written?.committed) {
      const { changes } = entry.written
      const changed = (statement: number) => (changes[statement] ?? 0) > 0
      // A throttled kind's notification is pending only if the write counted it within its window.
      const pending = [
        ...plan.notifications.filter((row) => row.status === 'pending' && !row.throttle),
        ...(entry.counted ?? []).filter((counted) => changed(counted.statement)),
      ]
      // A digest this write opened closes by its message, delayed to its close (the cron's stuck
      // search is the backstop when the message is lost); one already open has its own.
      const opened = (entry.opens ?? []).filter((open) => changed(open.statement))
      dispatches.set(entry, [
        ...pending.map((row) => dispatchFor(row.id, row.scheduledAt, run.now)),
        ...opened.map((open) => dispatchFor(open.id, open.closesAt, run.now)),
      ])
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
