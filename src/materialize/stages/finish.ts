import { writeKvMarks } from '../kv.ts'
import { describe, type EventsRun, identityOf } from '../run.ts'
import type { Enqueued } from './enqueue.ts'

/** Outcomes of an event whose notifications go on to be sent: logged at debug, counted in the batch's line. */
const ROUTINE: ReadonlySet<string> = new Set(['enqueued', 'digested'])

/**
 * Stage 7: every message that came this far is done — a duplicate found in
 * D1, an event recorded (or found recorded by a concurrent batch), an ignored
 * event recorded — and is acked. Their keys are marked in KV (they are
 * committed and dispatched), counters raised since the write are written, and
 * one line sums the batch up.
 */
export async function finishStage(run: EventsRun, enqueued: readonly Enqueued[]): Promise<void> {
  const done: string[] = []
  const outcomes: Record<string, number> = {}
  for (const item of enqueued) {
    if (item.type === 'duplicate') {
      const { plan, work, inbound } = item
      // Already counted with the write.
      run.ack(item)
      run.log.info('event.skipped-duplicate', {
        ...describe(inbound),
        ...identityOf(work.event),
        by: 'd1',
      })
      if (plan.redispatch.length > 0) {
        run.log.info('event.redispatched', { ...identityOf(work.event), count: plan.redispatch.length })
      }
      done.push(work.event.idempotencyKey)
    } else if (item.type === 'record') {
      const { plan, work, inbound } = item
      const won = item.written.won
      run.ack(item)
      const outcome = won ? plan.outcome : 'skipped-duplicate'
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
      // An event that made notifications to send is told again by each one's `notification.sent` (with its
      // event id and kind), and counted in the batch's line: at info, one line per email is enough (what a
      // line costs: docs/cost.md). Every other outcome says something went another way, and stays at info.
      const fields = {
        ...describe(inbound),
        ...identityOf(work.event),
        kind: plan.kind,
        notifications: plan.notifications.length,
        note: plan.note,
      }
      if (ROUTINE.has(outcome)) run.log.debug(`event.${outcome}`, fields)
      else run.log.info(`event.${outcome}`, fields)
      done.push(work.event.idempotencyKey)
    } else {
      run.ack(item)
      done.push(item.row.idempotencyKey)
    }
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
  // One line per batch: what `npm run bench` reads to show round trips stay flat as batches grow, and how
  // many events of each outcome the batch recorded.
  run.log.info('materialize.batch', { messages: run.size, d1RoundTrips: run.roundTrips(), outcomes })
}
