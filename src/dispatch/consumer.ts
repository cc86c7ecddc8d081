import { PipelineError } from '../errors.ts'
import type { Logger } from '../log.ts'
import { sendAll } from '../queue/send.ts'
import { settleBatch } from '../queue/settle.ts'
import { claimStage, type Later, type ToSend } from './claim-stage.ts'
import { MarkWriter } from './marks.ts'
import { DispatchRun } from './run.ts'
import { sendAndRecord } from './send.ts'
import { transportFor } from './transports/index.ts'

/** Sends in flight at once from one batch. */
const SEND_CONCURRENCY = 6

/**
 * Consumer of `notify-dispatch`: claim every notification of the batch
 * (`pending → sending` under the batch's claim token and lease; one winner;
 * verification decisions that arrived from both sources settled on the way),
 * send the claimed ones a few at a time through the configured transport and
 * record each result as its send finishes (grouped with those that finished
 * while the previous write was in flight), then put back what is not due yet.
 * The lease is renewed while sends run, and every mark applies only under the
 * token that claimed, so a send slower than the lease is never sent a second
 * time by a delivery that took over, and never has its outcome overwritten.
 * Transient send failures follow DISPATCH_RETRY_DELAYS_SECONDS, then
 * dead-letter; permanent ones end the notification `failed` without a retry.
 */
export async function consumeDispatch(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const run = new DispatchRun(env, log)
  const { toSend, later } = await claimStage(run, batch.messages)
  await sendStage(run, toSend)
  await requeueStage(run, later)
  await settleBatch(batch, run.settlements(), { dlq: env.DLQ, log, fallbackDelaySeconds: 30 })
}

/**
 * Sends, a few at a time, under a renewed lease; each result is written as its
 * send finishes, together with the results that finished while the previous
 * write was in flight (MarkWriter).
 */
async function sendStage(run: DispatchRun, toSend: readonly ToSend[]): Promise<void> {
  const { env, config, log, lease } = run
  const context = { env, config, log, lease, transport: transportFor(env, config), marks: new MarkWriter(env.DB) }
  const queue = [...toSend]
  run.lease.start()
  try {
    await Promise.all(
      Array.from({ length: Math.min(SEND_CONCURRENCY, queue.length) }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) {
          run.settle(next.message, await sendAndRecord(context, next.message, next.row))
        }
      }),
    )
  } finally {
    run.lease.stop()
  }
}

/** Notifications that are not due yet go back on the queue with their delay. */
async function requeueStage(run: DispatchRun, later: readonly Later[]): Promise<void> {
  if (later.length === 0) return
  try {
    await sendAll(
      run.env.DISPATCH,
      later.map((entry) => entry.outgoing),
    )
    for (const { message } of later) run.settle(message, { action: 'ack' })
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `notify-dispatch: ${(cause as Error).message}`, { cause })
    for (const { message } of later) run.fail(message, error)
  }
}
