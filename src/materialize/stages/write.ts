import { type EventWrite, persistEvents, type WriteResult } from '../../d1-batch.ts'
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
import { type BatchRun, describe } from '../batch.ts'
import { upsertContact } from '../contacts.ts'
import { insertProcessedEvent, type ProcessedEvent } from '../processed.ts'
import type { Ignored } from './decode.ts'
import type { Planned, PlannedDuplicate, PlannedRecord } from './plan.ts'

/**
 * Where an event's statements are whose changes say what its write decided,
 * so the enqueue stage enqueues the close of a digest this write opened, and
 * a throttled notification only when it went out pending.
 */
export type WriteMarks = {
  /** The digests its write may open: the open statement's place among the event's statements, the digest's id and close. */
  opens: { statement: number; id: string; closesAt: string }[]
  /** Its throttled notifications: the statement that counts one sent, the notification's id and due time. */
  counted: { statement: number; id: string; scheduledAt: string }[]
}

/** A planned event whose write committed: whether it won its processed mark, and what each statement changed. */
export type WrittenRecord = PlannedRecord & WriteMarks & { written: Extract<WriteResult, { committed: true }> }

/** What the write lets through, in batch order: what it committed, and the duplicates found in D1 (nothing to write). */
export type Written = WrittenRecord | PlannedDuplicate | Ignored

/** One event's write, or a duplicate that has nothing to write, in the batch's order. */
type Slot = EventWrite<(PlannedRecord & WriteMarks) | Ignored> | PlannedDuplicate

/**
 * Stage 4: persist each event's processed mark, notifications, contact and
 * counter, with the batch's counters and gauges, in one D1 batch; when that
 * fails, each event on its own (persistEvents), so one bad event fails alone.
 */
export async function writeStage(run: BatchRun, planned: readonly Planned[]): Promise<Written[]> {
  const slots: Slot[] = planned.map((item) => {
    if (item.type === 'ignored')
      return { item, statements: [insertProcessedEvent(run.db, item.row, run.nowIso, run.id)] }
    if (item.type === 'record') return recordWrite(run, item)
    // A duplicate found in D1 is counted now, with the batch (it may still redispatch).
    run.count(item.inbound.source, 'skipped-duplicate')
    return item
  })
  const writes = slots.filter((slot) => 'statements' in slot)
  const { results, sharedError } = await persistEvents(run.db, writes, [
    ...run.counters.drain(run.db),
    ...lagGauges(run, planned),
  ])
  if (sharedError) run.log.warn('materialize.counters-failed', { error: sharedError })
  const written: Written[] = []
  for (const slot of slots) {
    if (!('statements' in slot)) {
      written.push(slot)
      continue
    }
    const { item } = slot
    const result = results.get(item)
    if (result?.committed) written.push(item.type === 'record' ? { ...item, written: result } : item)
    else if (result) {
      const { cause } = result
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 write: ${(cause as Error).message}`, { cause })
      const eventId = item.type === 'record' ? item.work.event.eventId : item.row.eventId
      run.fail(item, error, { ...describe(item.inbound), eventId })
    }
  }
  return written
}

/**
 * An event's statements. A digested notification is two: open its digest
 * unless one is open, then join the open one; one of a throttled kind is
 * three or four (src/notifications/throttle.ts). Its `WriteMarks` say where
 * the statements are whose changes the enqueue stage reads.
 */
function recordWrite(run: BatchRun, item: PlannedRecord): EventWrite<PlannedRecord & WriteMarks> {
  const { work, plan } = item
  const labels = canonicalLabels({ outcome: plan.outcome, source: work.source })
  const statements = [insertProcessedEvent(run.db, processedRow(item), run.nowIso, run.id)]
  const opens: WriteMarks['opens'] = []
  const counted: WriteMarks['counted'] = []
  // notify_notifications_total follows these rows by trigger (migration 0004).
  for (const row of plan.notifications) {
    if (isDigestMember(row)) {
      opens.push({ statement: statements.length, id: row.digest.id, closesAt: row.digest.closesAt })
      statements.push(openDigest(run.db, row, run.nowIso), insertMember(run.db, row, run.nowIso))
    } else if (isThrottled(row)) {
      statements.push(beginWindow(run.db, row, run.nowIso))
      const { digest } = row.throttle
      if (digest) {
        opens.push({ statement: statements.length, id: digest.id, closesAt: digest.closesAt })
        statements.push(openDigestOverThrottle(run.db, row, run.nowIso))
      }
      statements.push(insertThrottled(run.db, row, run.nowIso))
      counted.push({ statement: statements.length, id: row.id, scheduledAt: row.scheduledAt })
      statements.push(countSend(run.db, row, run.nowIso))
    } else statements.push(insertNotification(run.db, row, run.nowIso))
  }
  statements.push(
    ...(plan.contact ? [upsertContact(run.db, plan.contact, run.nowIso)] : []),
    // Counted only by the batch that won the event's processed mark.
    incrementCounter(run.db, COUNTERS.events, labels, 1, {
      idempotencyKey: work.event.idempotencyKey,
      claim: run.id,
    }),
  )
  return { item: { ...item, opens, counted }, statements }
}

function processedRow({ work, plan, inbound }: PlannedRecord): ProcessedEvent {
  const { event, intent } = work
  return {
    idempotencyKey: event.idempotencyKey,
    eventId: event.eventId,
    contract: event.contract,
    eventType: event.eventType,
    kind: plan.kind ?? null,
    traceId: intent.type === 'notify' ? (intent.traceId ?? null) : null,
    outcome: plan.outcome,
    inbound,
  }
}

/**
 * `notify_consumer_lag_seconds{source}`: how old the newest-processed events of
 * each source were (event time, else when the bridge read them), the largest of this batch.
 */
function lagGauges(run: BatchRun, planned: readonly Planned[]): D1PreparedStatement[] {
  const lag = new Map<string, number>()
  for (const item of planned) {
    if (item.type === 'ignored') continue
    const { work } = item
    const seconds = Math.max(0, (run.now.getTime() - Date.parse(work.event.occurredAt)) / 1000)
    lag.set(work.source, Math.max(lag.get(work.source) ?? 0, seconds))
  }
  return [...lag].map(([source, seconds]) => setGauge(run.db, GAUGES.consumerLag, { source }, seconds, run.nowIso))
}
