import { shardIndexOf } from '../../d1/shards.ts'
import { type EventWrite, persistEvents, type WriteResult } from '../../d1/transactions.ts'
import { eraseLateArrivals } from '../../erasure/notification-statements.ts'
import { pseudonymOf, userPseudonymOf } from '../../erasure/pseudonym.ts'
import { PipelineError } from '../../errors.ts'
import { COUNTERS, canonicalLabels, type EventKey, GAUGES, incrementClaimed, setGauge } from '../../metrics/counters.ts'
import { type CountedChange, countChanges } from '../../notifications/counted.ts'
import { QUEUES } from '../../queue/names.ts'
import { upsertContact } from '../contacts.ts'
import { notificationWrites, type WriteMarks } from '../notification-writes.ts'
import { insertProcessedEvent, type ProcessedEvent } from '../processed.ts'
import { describe, type EventsRun } from '../run.ts'
import type { Ignored } from './decode.ts'
import type { Planned, PlannedDuplicate, PlannedRecord } from './plan.ts'

/** A planned event whose write committed: whether it won its processed mark, and what each statement changed. */
export type WrittenRecord = PlannedRecord & WriteMarks & { written: Extract<WriteResult, { committed: true }> }

/** What the write lets through, in batch order: what it committed, and the duplicates found in D1 (nothing to write). */
export type Written = WrittenRecord | PlannedDuplicate | Ignored

/** One event's write, or a duplicate that has nothing to write, in the batch's order. */
type Slot = EventWrite<(PlannedRecord & WriteMarks) | Ignored> | PlannedDuplicate

/**
 * Stage 4: persist each event's processed mark, notifications, contact and
 * counters, with the batch's counters and gauges, in one D1 batch; when that
 * fails, each event on its own (persistEvents), so one bad event fails alone.
 */
export async function writeStage(run: EventsRun, planned: readonly Planned[]): Promise<Written[]> {
  // The pseudonyms an erasure leaves of the users and contacts written, to keep an event that was on its way
  // when they were erased from writing them back (`eraseLateArrivals`, `upsertContact`).
  const pseudonyms = await Promise.all(planned.map((item) => pseudonymsOf(run, item)))
  const slots: Slot[] = planned.map((item, index) => {
    if (item.type === 'ignored')
      return { item, statements: [insertProcessedEvent(run.db, item.row, run.nowIso, run.id)] }
    if (item.type === 'record') return recordWrite(run, item, pseudonyms[index] as Pseudonyms)
    // A duplicate found in D1 is counted now, with the batch (it may still redispatch).
    if (run.countsEvent(item.message)) run.count(item.inbound.source, 'skipped-duplicate')
    return item
  })
  const writes = slots.filter((slot) => 'statements' in slot)
  const { results, sharedError } = await persistEvents(
    run.db,
    writes,
    [...run.counters.drain(run.db), ...lagGauges(run, planned)],
    // After the events' own statements: each event counts once its processed mark is this batch's,
    // and each notification once its insert is this batch's.
    [...eventCounters(run, planned), ...countChanges(run.db, writes.flatMap(changesOf))],
  )
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
 * two or three (src/notifications/throttle.ts). Its `WriteMarks` say where
 * the statements are whose changes the enqueue stage reads.
 */
function recordWrite(
  run: EventsRun,
  item: PlannedRecord,
  pseudonyms: Pseudonyms,
): EventWrite<PlannedRecord & WriteMarks> {
  const { work, plan, inbound } = item
  const statements = [insertProcessedEvent(run.db, processedRow(item), run.nowIso, run.id)]
  const { opens, counted, changes } = notificationWrites(
    run.db,
    plan.notifications,
    run.nowIso,
    statements,
    run.countMark,
  )
  const hashes = [...new Set(plan.notifications.flatMap((row) => (row.recipientHash ? [row.recipientHash] : [])))]
  // Last of its notifications' statements: an event on its way when its recipient was erased writes nothing of them.
  if (plan.notifications.length > 0) {
    statements.push(
      eraseLateArrivals(run.db, hashes, inbound.receivedAt, work.event.eventId, run.nowIso, pseudonyms.users),
    )
  }
  const late = pseudonyms.contact && { ...pseudonyms.contact, receivedAt: inbound.receivedAt }
  if (plan.contact) statements.push(upsertContact(run.db, plan.contact, run.nowIso, late))
  // Written on its own (the batch failed), it counts itself in the same transaction.
  const labels = canonicalLabels({ outcome: plan.outcome, source: work.source })
  const alone = [
    ...(run.countsEvent(item.message) ? [incrementClaimed(run.db, COUNTERS.events, labels, [work.event], run.id)] : []),
    ...countChanges(run.db, changes),
  ]
  return { item: { ...item, opens, counted, changes }, statements, alone }
}

/** The notification inserts of one event's write that count themselves. */
function changesOf(write: Slot): CountedChange[] {
  return 'item' in write && write.item.type === 'record' ? write.item.changes : []
}

/**
 * `notify_events_total{outcome, source}` of the batch's recorded events: one
 * statement per label set, counting the events whose processed mark this
 * batch won — so an event another batch (or an earlier attempt) wrote is not
 * counted again, and one whose write failed is counted when it is written.
 * Written only with the whole batch: when it falls back to one event at a
 * time, each event counts itself in its own transaction (`recordWrite`'s
 * `alone`), so no count waits on a later write that a crash could lose.
 */
function eventCounters(run: EventsRun, planned: readonly Planned[]): D1PreparedStatement[] {
  const eventsByLabels = new Map<string, EventKey[]>()
  for (const item of planned) {
    if (item.type !== 'record' || !run.countsEvent(item.message)) continue
    const labels = canonicalLabels({ outcome: item.plan.outcome, source: item.work.source })
    const events = eventsByLabels.get(labels) ?? []
    events.push(item.work.event)
    eventsByLabels.set(labels, events)
  }
  return [...eventsByLabels].map(([labels, events]) =>
    incrementClaimed(run.db, COUNTERS.events, labels, events, run.id),
  )
}

/** The pseudonyms of an event's recipients, and of its contact's address and user. */
type Pseudonyms = { users: [string, string][]; contact?: { pseudonym: string; user: string } }

async function pseudonymsOf(run: EventsRun, item: Planned): Promise<Pseudonyms | undefined> {
  if (item.type !== 'record') return undefined
  const key = run.config.erasureKey
  const { notifications, contact } = item.plan
  const userIds = [...new Set(notifications.map((row) => row.recipientUserId))]
  return {
    users: await Promise.all(
      userIds.map(async (id): Promise<[string, string]> => [id, await userPseudonymOf(id, key)]),
    ),
    ...(contact
      ? {
          contact: {
            pseudonym: await pseudonymOf(contact.email, key),
            user: await userPseudonymOf(contact.userId, key),
          },
        }
      : {}),
  }
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
 * A shard of notify-events past the first keeps its own row (labelled with its
 * queue), so a shard that falls behind is not hidden by another's fresh batch:
 * the lag is read as the largest of them (src/metrics/prom.ts, the overview).
 */
function lagGauges(run: EventsRun, planned: readonly Planned[]): D1PreparedStatement[] {
  // With D1 shards, the primary's run alone keeps it: a shard that stops seeing a source would otherwise
  // keep its last lag, read as the largest.
  if (shardIndexOf(run.env) !== 0) return []
  const lag = new Map<string, number>()
  for (const item of planned) {
    if (item.type === 'ignored') continue
    const { work } = item
    const seconds = Math.max(0, (run.now.getTime() - Date.parse(work.event.occurredAt)) / 1000)
    lag.set(work.source, Math.max(lag.get(work.source) ?? 0, seconds))
  }
  const shard: Record<string, string> = run.queue === QUEUES.events ? {} : { queue: run.queue }
  return [...lag].map(([source, seconds]) =>
    setGauge(run.db, GAUGES.consumerLag, { source, ...shard }, seconds, run.nowIso),
  )
}
