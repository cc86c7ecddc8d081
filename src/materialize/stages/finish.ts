import { type BatchRun, describe, identityOf, type Work } from '../batch.ts'
import { writeKvMarks } from '../kv.ts'

/**
 * Stage 7: every message still open is done — a duplicate found in D1, an
 * event recorded (or found recorded by a concurrent batch), an ignored event
 * recorded. Their keys are marked in KV (they are committed and dispatched),
 * counters raised since the write are written, and one line sums the batch up.
 */
export async function finishStage(run: BatchRun): Promise<void> {
  const done: string[] = []
  for (const entry of run.open()) {
    const { plan, work, inbound } = entry
    if (plan?.type === 'duplicate') {
      // Already counted with the write.
      run.ack(entry)
      run.log.info('event.skipped-duplicate', {
        ...describe(inbound as NonNullable<typeof inbound>),
        ...identityOf((work as Work).event),
        by: 'd1',
      })
      if (plan.redispatch.length > 0) {
        run.log.info('event.redispatched', { ...identityOf((work as Work).event), count: plan.redispatch.length })
      }
    } else if (plan?.type === 'record') {
      const won = entry.written?.committed === true && entry.written.won
      run.ack(entry)
      run.log.info(`event.${won ? plan.outcome : 'skipped-duplicate'}`, {
        ...describe(inbound as NonNullable<typeof inbound>),
        ...identityOf((work as Work).event),
        kind: plan.kind,
        notifications: plan.notifications.length,
        note: plan.note,
      })
    } else if (entry.ignored) {
      run.ack(entry)
    } else continue
    done.push(work?.event.idempotencyKey ?? (entry.ignored?.idempotencyKey as string))
  }
  await writeKvMarks(run.env.IDEMPOTENCY, done, run.config.IDEMPOTENCY_TTL_DAYS, run.log)
  // Counters raised after the write (events that failed in it or in dispatch) are written too.
  const late = run.counters.drain(run.db)
  if (late.length > 0) {
    try {
      await run.db.batch(late)
    } catch (error) {
      run.log.warn('materialize.counters-failed', { error })
    }
  }
  // One line per batch: what `npm run bench` reads to show round trips stay flat as batches grow.
  run.log.info('materialize.batch', { messages: run.entries.length, d1RoundTrips: run.roundTrips() })
}
