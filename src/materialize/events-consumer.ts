import type { Logger } from '../log.ts'
import { EventsRun } from './run.ts'
import { materializeSharded } from './shards.ts'
import { cancelStage } from './stages/cancel.ts'
import { decodeStage } from './stages/decode.ts'
import { type Enqueued, enqueueStage } from './stages/enqueue.ts'
import { finishStage } from './stages/finish.ts'
import { type Known, knownStage } from './stages/known.ts'
import { planStage } from './stages/plan.ts'
import { releaseStage } from './stages/release.ts'
import { writeStage } from './stages/write.ts'

/**
 * Consumer of `notify-events`, one stage after another over the batch's
 * messages (materialize/stages), each taking what the one before produced:
 * decode and validate (`Decoded`) → skip what KV knows (`Known`) → read the
 * context and plan each event (`Planned`) → apply the cancellations of
 * cancelling events (src/cancel/) → write everything in one D1 batch
 * (`Written`) → send the dispatch messages (`Enqueued`) → release what waited
 * for the contacts just written → finish (ack, KV marks, late counters). A
 * message that leaves early — a dead letter, a duplicate, a failure — is
 * settled through `EventsRun` by the stage it leaves, the only place a
 * settlement is decided, and goes no further; then every message ends in
 * exactly one ack, retry or dead letter. D1 round trips per batch do not grow
 * with its size: one read, one write (more only after a failure). With D1
 * shards, planning to release runs once per shard an event touches
 * (./shards.ts), and finishing once. Never throws.
 */
export async function consumeEvents(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const run = new EventsRun(batch, env, log)
  const decoded = decodeStage(run, batch.messages)
  const known = await knownStage(run, decoded)
  const count = run.config.DB_SHARDS
  const enqueued =
    count === 1 ? await materialize(run, known) : await materializeSharded(run, batch, known, count, materialize)
  await finishStage(run, enqueued)
  await run.settlements.finish(batch, { dlq: env.DLQ, log })
}

/** Planning to release, in one database (with D1 shards, in one shard: ./shards.ts). */
async function materialize(run: EventsRun, known: readonly Known[]): Promise<Enqueued[]> {
  const planned = await cancelStage(run, await planStage(run, known))
  const written = await writeStage(run, planned)
  const enqueued = await enqueueStage(run, written)
  await releaseStage(run, written)
  return enqueued
}
