import { PipelineError } from '../errors.ts'
import type { Logger } from '../log.ts'
import { markEnqueued } from '../notifications/stuck.ts'
import type { Settlement } from '../queue/policy.ts'
import { type Outgoing, sendAll } from '../queue/send.ts'
import { settleBatch } from '../queue/settle.ts'
import { type BatchToSend, batchStage } from './batch-stage.ts'
import { claimStage, type Later, type ToSend } from './claim-stage.ts'
import { MarkWriter } from './marks.ts'
import { DispatchMessageSchema } from './message.ts'
import type { Pace } from './pace/client.ts'
import { DispatchRun } from './run.ts'
import { sendAndRecord } from './send.ts'
import { sendBatchAndRecord } from './send-batch.ts'
import { paceFor, type Transport, transportFor } from './transports/index.ts'

/** Sends in flight at once from one batch. */
const SEND_CONCURRENCY = 6

/**
 * Consumer of `notify-dispatch`: claim every notification of the batch
 * (`pending → sending` under the batch's lease, its token and expiry; one winner;
 * verification decisions that arrived from both sources settled on the way),
 * send the claimed ones a few at a time through the configured transport —
 * through resend, each at the slot the account's pace gives it, shared with
 * every other invocation (src/dispatch/pace/) — and record each result as its
 * send finishes (grouped with those that finished while the previous write was
 * in flight), then put back what is not due yet.
 * The lease is renewed while sends run, and every mark applies only under the
 * lease token that claimed, so a send slower than the lease is never sent a second
 * time by a delivery that took over, and never has its outcome overwritten.
 * Transient send failures are tried again at the time the row keeps
 * (DISPATCH_RETRY_DELAYS_SECONDS, never sooner than the provider asked), then
 * dead-letter; a refusal about the message dead-letters at once; a refusal
 * about our own configuration pauses the transport (src/dispatch/pause.ts).
 */
export async function consumeDispatch(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const run = new DispatchRun(env, log)
  const { toSend, later } = await claimStage(run, batch.messages)
  const pace = paceFor(env, run.config, log)
  const transport = transportFor(env, run.config, pace)
  const grouped = await batchStage(run, toSend, {
    size: run.config.RESEND_BATCH_SIZE,
    transport: transport.name,
    canBatch: transport.sendBatch !== undefined,
  })
  const { retries, orphans } = await sendStage(run, transport, pace, grouped.alone, grouped.batches)
  await requeueStage(run, [...later, ...grouped.later], retries, orphans)
  await settleBatch(batch, run.settlements(), { dlq: env.DLQ, log })
}

/**
 * Sends, a few at a time, under a renewed lease; each result is written as its
 * send finishes, together with the results that finished while the previous
 * write was in flight (MarkWriter).
 */
async function sendStage(
  run: DispatchRun,
  transport: Transport,
  pace: Pace | undefined,
  alone: readonly ToSend[],
  batches: readonly BatchToSend[],
): Promise<{ retries: Later[]; orphans: Outgoing[] }> {
  const { env, config, log, lease, pause } = run
  const context = { env, config, log, lease, transport, marks: new MarkWriter(env.DB), pause, pace }
  const queue: (ToSend | BatchToSend)[] = [...batches, ...alone]
  const retries: Later[] = []
  // The next tries of batch members claimed with their batch, without a message of their own here.
  const orphans: Outgoing[] = []
  // A retry's message goes out with the ones not due yet; the message is acked only after that.
  const settle = (message: Message<unknown>, settlement: Settlement, next: Outgoing | undefined) => {
    if (next) retries.push({ message, outgoing: next })
    else run.settle(message, settlement)
  }
  run.lease.start()
  try {
    await Promise.all(
      Array.from({ length: Math.min(SEND_CONCURRENCY, queue.length) }, async () => {
        for (let work = queue.shift(); work; work = queue.shift()) {
          if ('batchId' in work) {
            for (const result of await sendBatchAndRecord(context, work)) {
              const { message } = result.member
              if (message) settle(message, result.settlement, result.next)
              else if (result.next) orphans.push(result.next)
            }
          } else {
            const { settlement, next } = await sendAndRecord(context, work.message, work.row)
            settle(work.message, settlement, next)
          }
        }
      }),
    )
  } finally {
    run.lease.stop()
  }
  return { retries, orphans }
}

/**
 * Notifications that are not due yet, and those to try again, go back on the
 * queue with their delay, each message naming the due time it was sent for.
 * If that send fails the message is retried; a retry's row is already
 * `pending` at its new time, so the old message comes back stale and the cron
 * enqueues the new time once it has passed.
 */
async function requeueStage(
  run: DispatchRun,
  later: readonly Later[],
  retries: readonly Later[],
  orphans: readonly Outgoing[],
): Promise<void> {
  const all = [...later, ...retries]
  if (all.length === 0 && orphans.length === 0) return
  try {
    await sendAll(run.env.DISPATCH, [...all.map((entry) => entry.outgoing), ...orphans])
    for (const { message } of all) run.settle(message, { action: 'ack' })
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
