import { configOf, type TransportName } from '../config.ts'
import { shardEnvs } from '../d1/shards.ts'
import type { Logger } from '../log.ts'
import { DispatchRun } from './run.ts'
import { bySharded } from './shard-batches.ts'
import { bundleStage } from './stages/bundle.ts'
import { claimStage, claimsOf } from './stages/claim.ts'
import { closeDigestStage } from './stages/close-digests.ts'
import { escalateStage } from './stages/escalate.ts'
import { gateStage } from './stages/gate.ts'
import { markStage } from './stages/mark.ts'
import { requeueStage } from './stages/requeue.ts'
import { emailCourier, sendStage } from './stages/send.ts'
import { inAppCourier } from './transports/in-app.ts'
import { paceFor, transportFor } from './transports/index.ts'

/**
 * Consumer of `notify-dispatch`, one stage after another over the batch's
 * messages (dispatch/stages), each taking what the one before produced:
 * claim every notification of the batch in one D1 transaction, through the
 * gates that end or put off what must not go (`pending → sending` under the
 * batch's lease, its token and expiry; one winner; verification decisions
 * that arrived from both sources settled on the way) → close the digests that
 * are due (their email goes back on the queue for its send time) → decide
 * the emails whose wait for their in-app item ended (those that go are
 * written again and go back on the queue for their send time) → sort what
 * was claimed into the in-app items, each added to its recipient's feed, and
 * the emails, in bundles (one provider request each) and sends alone →
 * send them a few at a time, each through the transport its claim chose
 * (the first usable of EMAIL_TRANSPORTS, src/dispatch/failover.ts) — through
 * resend, each request at the slot the account's pace gives it, shared with
 * every other invocation (src/dispatch/pace/) — each try's outcome marked as
 * it ends → put back on the queue what is not due yet and what is tried
 * again. A message that leaves early is settled by the stage it leaves
 * through `DispatchRun`, and every message ends in exactly one ack, retry or
 * dead letter.
 * The lease is renewed while sends run, and every mark applies only under the
 * lease token that claimed, so a send slower than the lease is never sent a
 * second time by a delivery that took over, and never has its outcome
 * overwritten. Transient send failures are tried again at the time the row
 * keeps (DISPATCH_RETRY_DELAYS_SECONDS, never sooner than the provider
 * asked), then dead-letter; a refusal about the message dead-letters at once;
 * a refusal about our own configuration pauses the transport
 * (src/dispatch/pause.ts).
 */
export async function consumeDispatch(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  // With D1 shards, each shard's notifications go through the stages in that shard, side by side: a
  // bundle, a claim, a pause never spans two databases.
  const count = configOf(env).DB_SHARDS
  if (count === 1) return dispatchShard(batch, env, log)
  // Every shard's env before any part starts: a shard not bound fails the whole batch, none of it begun.
  const envs = shardEnvs(env, count)
  const parts = bySharded(batch, count, (body) => (body as { notificationId?: unknown } | null)?.notificationId)
  await Promise.all(parts.map(([shard, part]) => dispatchShard(part, envs[shard] as Env, log)))
}

/** One shard's messages of a batch, through every stage, each ended by its stage or at the end. */
async function dispatchShard(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const run = new DispatchRun(env, log)
  const claimed = await claimStage(run, claimsOf(run, batch.messages), gateStage)
  const closed = await closeDigestStage(run, claimed.toClose)
  await escalateStage(run, claimed.toEscalate)
  // In-app items go to their feeds first: no pace, no bundle, and the email transport's pause is not theirs.
  const inApp = claimed.toSend.filter((item) => item.row.channel === 'in-app')
  const mail = claimed.toSend.filter((item) => item.row.channel !== 'in-app')
  const shown = await sendStage(run, inAppCourier(env), undefined, { alone: inApp, bundles: [] }, markStage, undefined)
  // Each email goes through the transport its claim chose (src/notifications/route.ts): the first usable
  // of EMAIL_TRANSPORTS, or the one it may have gone out through. Each transport's part has its own pace,
  // bundles and pause. The parts are sorted into bundles one after another, those of a transport that sends
  // none first: a member of a batch routed there leaves its batch before the batch's own transport reads
  // who is in it. Then they are sent side by side.
  const parts = [...Map.groupBy(mail, (item) => (item.row.transport ?? run.config.transports[0]) as TransportName)].map(
    ([name, part]) => {
      const pace = paceFor(env, run.config, name, log)
      return { name, part, pace, transport: emailCourier(transportFor(env, run.config, name, pace), run.config) }
    },
  )
  parts.sort(
    (a, b) => Number(a.transport.deliverBundle !== undefined) - Number(b.transport.deliverBundle !== undefined),
  )
  const grouped: Awaited<ReturnType<typeof bundleStage>>[] = []
  for (const { part, transport } of parts) {
    grouped.push(
      await bundleStage(run, part, {
        size: run.config.RESEND_BATCH_SIZE,
        transport: transport.name,
        canBundle: transport.deliverBundle !== undefined,
      }),
    )
  }
  const sent = await Promise.all(
    parts.map(async ({ name, pace, transport }, index) => {
      const work = grouped[index] as Awaited<ReturnType<typeof bundleStage>>
      const done = await sendStage(run, transport, pace, work, markStage, run.transports.get(name))
      return { ...done, later: work.later }
    }),
  )
  await requeueStage(
    run,
    [...claimed.later, ...closed, ...sent.flatMap((part) => part.later)],
    [...shown.retries, ...sent.flatMap((part) => part.retries)],
    [...shown.orphans, ...sent.flatMap((part) => part.orphans)],
  )
  await run.finish(batch, { dlq: env.DLQ, log })
}
