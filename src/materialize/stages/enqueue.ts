import { PipelineError } from '../../errors.ts'
import { dispatchFor } from '../../queue/dispatch-message.ts'
import { type Outgoing, sendAll } from '../../queue/send.ts'
import type { EventsRun } from '../run.ts'
import type { Written } from './write.ts'

/** What the enqueue stage lets through, in batch order: every written event whose dispatch messages are on the queue (or that had none). */
export type Enqueued = Written

/**
 * Stage 5, enqueue: one `notify-dispatch` message per pending notification just
 * written, per email just written to wait for its in-app item (for the end of its wait), and per digest just opened (for its close), and again for pending ones of events found already processed (the
 * notification row is the outbox of the dispatch queue). If the send fails,
 * those events are retried: committed ones come back as duplicates and
 * dispatch again.
 */
export async function enqueueStage(run: EventsRun, written: readonly Written[]): Promise<Enqueued[]> {
  const dispatches = new Map<Written, Outgoing[]>()
  for (const item of written) {
    if (item.type === 'duplicate') {
      dispatches.set(
        item,
        item.plan.redispatch.map((row) => dispatchFor(row.id, row.scheduledAt, run.now)),
      )
    } else if (item.type === 'record') {
      const { plan, written: result } = item
      const changed = (statement: number) => (result.changes[statement] ?? 0) > 0
      // A throttled kind's notification is pending only if the write counted it within its window.
      const pending = [
        // An email that waits for its in-app item comes back at the end of its wait, to be decided.
        ...plan.notifications.filter(
          (row) => (row.status === 'pending' && !row.throttle) || row.status === 'escalating',
        ),
        ...item.counted.filter((counted) => changed(counted.statement)),
      ]
      // A digest this write opened closes by its message, delayed to its close (the cron's stuck
      // search is the backstop when the message is lost); one already open has its own.
      const opened = item.opens.filter((open) => changed(open.statement))
      dispatches.set(item, [
        ...pending.map((row) => dispatchFor(row.id, row.scheduledAt, run.now)),
        ...opened.map((open) => dispatchFor(open.id, open.closesAt, run.now)),
      ])
    }
  }
  const outgoing = [...dispatches.values()].flat()
  if (outgoing.length === 0) return [...written]
  try {
    await sendAll(run.env.DISPATCH, outgoing)
    return [...written]
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `notify-dispatch: ${(cause as Error).message}`, { cause })
    const failed = new Set<Written>()
    for (const [item, list] of dispatches) {
      if (list.length === 0) continue
      run.fail(item, error, { messageId: item.message.id, stage: 'dispatch' })
      failed.add(item)
    }
    return written.filter((item) => !failed.has(item))
  }
}
