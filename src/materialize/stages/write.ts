import { type EventWrite, persistEvents } from '../../d1-batch.ts'
import { PipelineError } from '../../errors.ts'
import { COUNTERS, canonicalLabels, GAUGES, incrementCounter, setGauge } from '../../metrics/counters.ts'
import { insertMember, isDigestMember, openDigest } from '../../notifications/digest.ts'
import { insertNotification } from '../../notifications/insert.ts'
import {
  beginWindow,
  countSend,
  insertThrottled,
  isThrottled,
  openDigestOverThrottle,
} from '../../notifications/throttle.ts'
import { type BatchRun, describe, type Entry, type Work } from '../batch.ts'
import { upsertContact } from '../contacts.ts'
import type { Plan } from '../plan-event.ts'
import { insertProcessedEvent, type ProcessedEvent } from '../processed.ts'

type Recorded = Extract<Plan, { type: 'record' }>

/**
 * Stage 4: persist each event's processed mark, notifications, contact and
 * counter, with the batch's counters and gauges, in one D1 batch; when that
 * fails, each event on its own (persistEvents), so one bad event fails alone.
 */
export async function writeStage(run: BatchRun): Promise<void> {
  const writes: EventWrite<Entry>[] = []
  for (const entry of run.open()) {
    if (entry.ignored)
      writes.push({ item: entry, statements: [insertProcessedEvent(run.db, entry.ignored, run.nowIso, run.claim)] })
    else if (entry.plan?.type === 'record')
      writes.push({ item: entry, statements: recordStatements(run, entry, entry.plan) })
    // A duplicate found in D1 is counted now, with the batch (it may still redispatch).
    else if (entry.plan?.type === 'duplicate')
      run.count((entry.inbound as { source: string }).source, 'skipped-duplicate')
  }
  const planned = run.entries.filter((entry) => entry.plan)
  const { results, sharedError } = await persistEvents(run.db, writes, [
    ...run.counters.drain(run.db),
    ...lagGauges(run, planned),
  ])
  if (sharedError) run.log.warn('materialize.counters-failed', { error: sharedError })
  for (const [entry, result] of results) {
    entry.written = result
    if (result.committed) continue
    const { cause } = result
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 write: ${(cause as Error).message}`, { cause })
    run.fail(
      entry,
      error,
      entry.inbound ? { ...describe(entry.inbound), eventId: entry.work?.event.eventId ?? entry.ignored?.eventId } : {},
    )
  }
}

/**
 * An event's statements. A digested notification is two: open its digest
 * unless one is open, then join the open one; one of a throttled kind is
 * three or four (src/notifications/throttle.ts). `entry.opens` and
 * `entry.counted` record where the statements are whose changes say what the
 * write decided, so the dispatch stage enqueues the close of a digest this
 * write opened, and a throttled notification only when it went out pending.
 */
function recordStatements(run: BatchRun, entry: Entry, plan: Recorded): D1PreparedStatement[] {
  const work = entry.work as Work
  const labels = canonicalLabels({ outcome: plan.outcome, source: work.source })
  const statements = [insertProcessedEvent(run.db, processedRow(entry, plan), run.nowIso, run.claim)]
  entry.opens = []
  entry.counted = []
  // notify_notifications_total follows these rows by trigger (migration 0004).
  for (const row of plan.notifications) {
    if (isDigestMember(row)) {
      entry.opens.push({ statement: statements.length, id: row.digest.id, closesAt: row.digest.closesAt })
      statements.push(openDigest(run.db, row, run.nowIso), insertMember(run.db, row, run.nowIso))
    } else if (isThrottled(row)) {
      statements.push(beginWindow(run.db, row, run.nowIso))
      const { digest } = row.throttle
      if (digest) {
        entry.opens.push({ statement: statements.length, id: digest.id, closesAt: digest.closesAt })
        statements.push(openDigestOverThrottle(run.db, row, run.nowIso))
      }
      statements.push(insertThrottled(run.db, row, run.nowIso))
      entry.counted.push({ statement: statements.length, id: row.id, scheduledAt: row.scheduledAt })
      statements.push(countSend(run.db, row, run.nowIso))
    } else statements.push(insertNotification(run.db, row, run.nowIso))
  }
  return [
    ...statements,
    ...(plan.contact ? [upsertContact(run.db, plan.contact, run.nowIso)] : []),
    // Counted only by the batch that won the event's processed mark.
    incrementCounter(run.db, COUNTERS.events, labels, 1, {
      idempotencyKey: work.event.idempotencyKey,
      claim: run.claim,
    }),
  ]
}

function processedRow(entry: Entry, plan: Recorded): ProcessedEvent {
  const { event, intent } = entry.work as Work
  return {
    idempotencyKey: event.idempotencyKey,
    eventId: event.eventId,
    contract: event.contract,
    eventType: event.eventType,
    kind: plan.kind ?? null,
    traceId: intent.type === 'notify' ? (intent.traceId ?? null) : null,
    outcome: plan.outcome,
    inbound: entry.inbound as ProcessedEvent['inbound'],
  }
}

/**
 * `notify_consumer_lag_seconds{source}`: how old the newest-processed events of
 * each source were (event time, else when the bridge read them), the largest of this batch.
 */
function lagGauges(run: BatchRun, entries: readonly Entry[]): D1PreparedStatement[] {
  const lag = new Map<string, number>()
  for (const entry of entries) {
    const work = entry.work as Work
    const seconds = Math.max(0, (run.now.getTime() - Date.parse(work.event.occurredAt)) / 1000)
    lag.set(work.source, Math.max(lag.get(work.source) ?? 0, seconds))
  }
  return [...lag].map(([source, seconds]) => setGauge(run.db, GAUGES.consumerLag, { source }, seconds, run.nowIso))
}
