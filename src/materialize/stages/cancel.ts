import { cancelKeys } from '../../cancel/cancel-key.ts'
import { PipelineError } from '../../errors.ts'
import type { EventsRun } from '../run.ts'
import { describe, identityOf } from '../run.ts'
import type { Planned, PlannedRecord } from './plan.ts'

/**
 * Stage 3½: applies the cancellations the batch's cancelling events ask for
 * (src/cancel/), all at once, before their processed marks are written — so
 * a cancellation that fails is tried again with its events, and one that ran
 * and whose write then failed runs again and changes nothing more. An event
 * of the batch whose key one of them cancels (the two came together) is then
 * recorded as one cancelled before it came: its insert would write nothing
 * anyway (the key is recorded), and nothing of it is enqueued or counted as
 * sent. When the cancellations fail, their events are settled here (retried)
 * and go no further.
 */
export async function cancelStage(run: EventsRun, planned: readonly Planned[]): Promise<Planned[]> {
  const cancelling = planned.filter(
    (item): item is PlannedRecord => item.type === 'record' && item.plan.cancel !== undefined,
  )
  if (cancelling.length === 0) return [...planned]
  try {
    await cancelKeys(
      run.env,
      cancelling.map((item) => ({
        key: item.plan.cancel?.key as string,
        source: 'event' as const,
        by: item.work.event.idempotencyKey,
        reason: item.plan.cancel?.reason ?? null,
      })),
      run.now,
      run.log,
    )
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `cancellation: ${(cause as Error).message}`, { cause })
    for (const item of cancelling) run.fail(item, error, { ...describe(item.inbound), ...identityOf(item.work.event) })
    return planned.filter((item) => !cancelling.includes(item as PlannedRecord))
  }
  const keys = new Set(cancelling.map((item) => item.plan.cancel?.key))
  return planned.map((item) => {
    const key =
      item.type === 'record' && item.work.intent.type === 'notify' ? item.work.intent.cancellationKey : undefined
    if (item.type !== 'record' || key === undefined || !keys.has(key) || item.plan.notifications.length === 0)
      return item
    const note = `${key} was cancelled by an event of the same batch`
    return { ...item, plan: { ...item.plan, outcome: 'cancelled', notifications: [], note } }
  })
}
