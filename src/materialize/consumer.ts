import type { Logger } from '../log.ts'
import { settleBatch } from '../queue/settle.ts'
import { BatchRun } from './batch.ts'
import { decodeStage } from './stages/decode.ts'
import { enqueueStage } from './stages/enqueue.ts'
import { finishStage } from './stages/finish.ts'
import { knownStage } from './stages/known.ts'
import { planStage } from './stages/plan.ts'
import { releaseStage } from './stages/release.ts'
import { writeStage } from './stages/write.ts'

/**
 * Consumer of `notify-events`, one stage after another over the batch's
 * messages (materialize/stages): decode and validate → skip what KV knows →
 * read the context and plan each event → write everything in one D1 batch →
 * send the dispatch messages → release what waited for the contacts just
 * written → finish (KV marks, late counters). A stage
 * settles the messages it is done with through `BatchRun`, the only place a
 * settlement is decided; then every message ends in exactly one ack, retry or
 * dead letter. D1 round trips per batch do not grow with its size: one read,
 * one write (more only after a failure). Never throws.
 */
export async function consumeEvents(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const run = new BatchRun(batch, env, log)
  decodeStage(run)
  await knownStage(run)
  await planStage(run)
  await writeStage(run)
  await enqueueStage(run)
  await releaseStage(run)
  await finishStage(run)
  await settleBatch(batch, run.settlements(), { dlq: env.DLQ, log })
}
