import { cancelKey } from '../../cancel/cancel-key.ts'
import { PipelineError } from '../../errors.ts'
import type { EventsRun } from '../run.ts'
import { describe, identityOf } from '../run.ts'
import type { Planned } from './plan.ts'

/**
 * Stage 3½: applies the cancellations the batch's cancelling events ask for
 * (src/cancel/), before their processed marks are written — so a
 * cancellation that fails is tried again with its event, and one that ran
 * and whose write then failed runs again and changes nothing more. An event
 * whose cancellation failed is settled here (retried) and goes no further.
 */
export async function cancelStage(run: EventsRun, planned: readonly Planned[]): Promise<Planned[]> {
  const kept: Planned[] = []
  for (const item of planned) {
    const cancel = item.type === 'record' ? item.plan.cancel : undefined
    if (item.type !== 'record' || cancel === undefined) {
      kept.push(item)
      continue
    }
    try {
      await cancelKey(
        run.env,
        { key: cancel.key, source: 'event', by: item.work.event.idempotencyKey, reason: cancel.reason ?? null },
        run.now,
        run.log,
      )
      kept.push(item)
    } catch (cause) {
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `cancellation: ${(cause as Error).message}`, { cause })
      run.fail(item, error, { ...describe(item.inbound), ...identityOf(item.work.event) })
    }
  }
  return kept
}
