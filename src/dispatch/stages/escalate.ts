import { PipelineError } from '../../errors.ts'
import { escalateDue } from '../../materialize/escalate.ts'
import type { DispatchRun, ToEscalate } from '../run.ts'

/**
 * Decides the escalations whose wait ended (src/materialize/escalate.ts):
 * each email that waited for its in-app item ends unsent, or is written
 * again to be sent and goes back on the queue for its send time, where the
 * claim takes it like any notification. A feed or D1 that fails tries the
 * messages again; the feed answers what it decided, if it did.
 */
export async function escalateStage(run: DispatchRun, due: readonly ToEscalate[]): Promise<void> {
  if (due.length === 0) return
  try {
    await escalateDue(
      run.env,
      run.config,
      due.map((entry) => entry.id),
      run.now,
      run.log,
    )
    for (const entry of due) run.ack(entry.message)
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `escalation: ${(cause as Error).message}`, { cause })
    for (const entry of due) run.fail(entry.message, error)
  }
}
