import { configOf } from '../config.ts'
import {
  type DecodedEvent,
  decodeInbound,
  describeIssues,
  type EventIdentity,
  type InboundEvent,
  InboundEventSchema,
  toFieldIssues,
} from '../contracts/index.ts'
import { dispatchFor } from '../dispatch/message.ts'
import { PipelineError } from '../errors.ts'
import type { Logger } from '../log.ts'
import { COUNTERS, CounterBatch, canonicalLabels, GAUGES, incrementCounter, setGauge } from '../metrics/counters.ts'
import { countRoundTrips } from '../metrics/round-trips.ts'
import { type Settlement, settleFailure } from '../queue/policy.ts'
import { type Outgoing, sendAll } from '../queue/send.ts'
import { settleBatch } from '../queue/settle.ts'
import { type BatchContext, loadContext } from './context.ts'
import { intentOf } from './kinds.ts'
import { readKvMarks, writeKvMarks } from './kv.ts'
import { type EventWrite, persistEvents } from './persist.ts'
import { type Plan, planEvent, type Work } from './plan.ts'
import { insertProcessedEvent, type ProcessedEvent } from './processed.ts'
import { insertNotification, upsertContact } from './write.ts'

type Item = { message: Message<unknown>; inbound: InboundEvent; work: Work }
type Planned = Item & { plan: Plan }

/**
 * Consumer of `notify-events` (DESIGN §4): decode and validate, deduplicate
 * (KV fast path, D1 authority), plan each event's notifications, persist
 * notifications + processed marks + counters in one D1 batch, then send one
 * `notify-dispatch` message per pending notification and mark the keys in KV.
 *
 * D1 round trips per queue batch do not grow with its size: one read, one
 * write (more only after a failure: each event written on its own, late
 * counters). Every message ends in exactly one ack, retry or dead letter;
 * this function never throws.
 */
export async function consumeEvents(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const config = configOf(env)
  const now = new Date()
  const nowIso = now.toISOString()
  const claim = crypto.randomUUID()
  const settlements = new Map<Message<unknown>, Settlement>()
  const counters = new CounterBatch()
  // Every D1 round trip of this batch is counted, and logged with the batch.
  const { db, roundTrips } = countRoundTrips(env.DB)
  const ignoredRows: { message: Message<unknown>; row: ProcessedEvent }[] = []
  const items: Item[] = []
  const seenKeys = new Set<string>()

  const fail = (message: Message<unknown>, error: unknown, fields: Record<string, unknown>, kind?: string) => {
    const settled = settleFailure(error, message.attempts, config.RETRY_DELAYS_SECONDS)
    const settlement = settled.action === 'dead-letter' && kind ? { ...settled, kind } : settled
    settlements.set(message, settlement)
    if (settlement.action === 'dead-letter')
      counters.add(COUNTERS.events, { source: String(fields.source), outcome: 'dead-lettered' })
    log.warn(`event.${settlement.action}`, { ...fields, attempts: message.attempts, ...failureFields(settlement) })
  }

  // 1. Decode and validate.
  for (const message of batch.messages) {
    const parsed = InboundEventSchema.safeParse(message.body)
    if (!parsed.success) {
      const error = `not an InboundEvent: ${describeIssues(toFieldIssues(parsed.error))}`
      settlements.set(message, { action: 'dead-letter', code: 'NTF_INVALID_PAYLOAD', error })
      counters.add(COUNTERS.events, { source: 'unknown', outcome: 'dead-lettered' })
      log.warn('event.invalid', { messageId: message.id, code: 'NTF_INVALID_PAYLOAD', error })
      continue
    }
    const inbound = parsed.data
    const decoded = decodeInbound(inbound)
    const where = describe(inbound)
    if (decoded.status === 'invalid') {
      settlements.set(message, { action: 'dead-letter', code: decoded.code, error: decoded.message })
      counters.add(COUNTERS.events, { source: inbound.source, outcome: 'dead-lettered' })
      log.warn('event.invalid', { ...where, ...decoded.identity, code: decoded.code, error: decoded.message })
      continue
    }
    if (decoded.status === 'ignored') {
      const row = ignoredRow(inbound, decoded.identity)
      if (row && !seenKeys.has(row.idempotencyKey)) {
        seenKeys.add(row.idempotencyKey)
        ignoredRows.push({ message, row })
      } else settlements.set(message, { action: 'ack' })
      counters.add(COUNTERS.events, { source: inbound.source, outcome: 'ignored-event' })
      log.info('event.ignored-event', { ...where, ...decoded.identity, reason: decoded.reason })
      continue
    }
    const { event } = decoded
    for (const warning of event.warnings)
      log.warn('event.contract-warning', { ...where, eventId: event.eventId, warning })
    log.info('event.consumed', { ...where, ...identityOf(event) })
    if (seenKeys.has(event.idempotencyKey)) {
      // The same event twice in one batch: the first one decides.
      skipDuplicate(message, inbound, event, 'batch')
      continue
    }
    seenKeys.add(event.idempotencyKey)
    items.push({
      message,
      inbound,
      work: { event, source: inbound.source, attempts: message.attempts, intent: intentOf(event, inbound.receivedAt) },
    })
  }

  function skipDuplicate(message: Message<unknown>, inbound: InboundEvent, event: DecodedEvent, by: string) {
    settlements.set(message, { action: 'ack' })
    counters.add(COUNTERS.events, { source: inbound.source, outcome: 'skipped-duplicate' })
    log.info('event.skipped-duplicate', { ...describe(inbound), ...identityOf(event), by })
  }

  // 2. KV fast path: a key marked there was committed to D1 and dispatched.
  const marked = await readKvMarks(
    env.IDEMPOTENCY,
    items.map((item) => item.work.event.idempotencyKey),
    log,
  )
  const fresh = items.filter((item) => {
    if (!marked.has(item.work.event.idempotencyKey)) return true
    skipDuplicate(item.message, item.inbound, item.work.event, 'kv')
    return false
  })

  // 3. Read what planning needs (one D1 round trip), then plan each event on its own.
  const planned: Planned[] = []
  if (fresh.length > 0) {
    let context: BatchContext | undefined
    try {
      context = await loadContext(db, contextQuery(fresh))
    } catch (cause) {
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 read: ${(cause as Error).message}`, { cause })
      for (const item of fresh)
        fail(item.message, error, { ...describe(item.inbound), eventId: item.work.event.eventId })
    }
    for (const item of context ? fresh : []) {
      const fields = { ...describe(item.inbound), ...identityOf(item.work.event) }
      try {
        const plan = await planEvent(item.work, context as BatchContext, config, now)
        if (plan.type === 'fail') {
          const kind = item.work.intent.type === 'notify' ? item.work.intent.kind : undefined
          fail(item.message, plan.error, fields, kind)
        } else planned.push({ ...item, plan })
      } catch (error) {
        // A bug in planning one event fails that event, not the batch.
        fail(item.message, error, fields)
      }
    }
  }

  // 4. Persist: each event's processed mark, notifications, contact and counter, with the batch's
  // counters and gauges, in one D1 batch; if that fails, each event on its own (persistEvents).
  const writes: EventWrite<Message<unknown>>[] = []
  const logFields = new Map<Message<unknown>, Record<string, unknown>>()
  for (const { message, row } of ignoredRows) {
    writes.push({ item: message, statements: [insertProcessedEvent(db, row, nowIso, claim)] })
    logFields.set(message, { ...describe(row.inbound), eventId: row.eventId })
  }
  for (const item of planned) {
    const { plan, work, inbound, message } = item
    if (plan.type === 'duplicate') {
      counters.add(COUNTERS.events, { source: inbound.source, outcome: 'skipped-duplicate' })
      continue
    }
    if (plan.type !== 'record') continue
    const guard = { idempotencyKey: work.event.idempotencyKey, claim }
    const labels = canonicalLabels({ outcome: plan.outcome, source: inbound.source })
    writes.push({
      item: message,
      statements: [
        insertProcessedEvent(db, processedRow(item, plan), nowIso, claim),
        // notify_notifications_total follows these rows by trigger (migration 0004).
        ...plan.notifications.map((row) => insertNotification(db, row, nowIso)),
        ...(plan.contact ? [upsertContact(db, plan.contact, nowIso)] : []),
        // Counted only by the batch that won the event's processed mark.
        incrementCounter(db, COUNTERS.events, labels, 1, guard),
      ],
    })
    logFields.set(message, { ...describe(inbound), eventId: work.event.eventId })
  }
  const { results: written, sharedError } = await persistEvents(db, writes, [
    ...counters.drain(db),
    ...lagGauges(db, fresh, now),
  ])
  if (sharedError) log.warn('materialize.counters-failed', { error: sharedError })
  for (const [message, result] of written) {
    if (result.committed) continue
    const { cause } = result
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 write: ${(cause as Error).message}`, { cause })
    fail(message, error, logFields.get(message) ?? { messageId: message.id })
  }
  const committed = (message: Message<unknown>) => written.get(message)?.committed === true

  // 5. Dispatch: one message per pending notification, and again for pending ones of duplicates.
  const dispatches = new Map<Message<unknown>, Outgoing[]>()
  for (const { plan, message } of planned) {
    if (plan.type === 'duplicate') {
      dispatches.set(
        message,
        plan.redispatch.map((row) => dispatchFor(row.id, row.scheduledAt, now)),
      )
    } else if (plan.type === 'record' && committed(message)) {
      const pending = plan.notifications.filter((row) => row.status === 'pending')
      dispatches.set(
        message,
        pending.map((row) => dispatchFor(row.id, row.scheduledAt, now)),
      )
    }
  }
  const outgoing = [...dispatches.values()].flat()
  if (outgoing.length > 0) {
    try {
      await sendAll(env.DISPATCH, outgoing)
    } catch (cause) {
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `notify-dispatch: ${(cause as Error).message}`, {
        cause,
      })
      // Committed events come back as duplicates and dispatch their pending notifications again.
      for (const [message, list] of dispatches) {
        if (list.length > 0) fail(message, error, { messageId: message.id, stage: 'dispatch' })
      }
    }
  }

  // 6. Outcomes; KV marks only for keys whose event is committed and dispatched (acked here).
  const done: string[] = []
  for (const item of planned) {
    const { plan, message } = item
    if (settlements.has(message)) continue
    if (plan.type === 'duplicate') {
      skipDuplicate(message, item.inbound, item.work.event, 'd1')
      if (plan.redispatch.length > 0)
        log.info('event.redispatched', { ...identityOf(item.work.event), count: plan.redispatch.length })
    } else if (plan.type === 'record') {
      const result = written.get(message)
      const won = result?.committed === true && result.won
      settlements.set(message, { action: 'ack' })
      log.info(`event.${won ? plan.outcome : 'skipped-duplicate'}`, {
        ...describe(item.inbound),
        ...identityOf(item.work.event),
        kind: plan.kind,
        notifications: plan.notifications.length,
        note: plan.note,
      })
    }
    done.push(item.work.event.idempotencyKey)
  }
  for (const { message, row } of ignoredRows) {
    if (!settlements.has(message)) {
      settlements.set(message, { action: 'ack' })
      done.push(row.idempotencyKey)
    }
  }
  await writeKvMarks(env.IDEMPOTENCY, done, config.IDEMPOTENCY_TTL_DAYS, log)

  // Counters raised after the write (events that failed in it or in dispatch) are written too.
  const late = counters.drain(db)
  if (late.length > 0) {
    try {
      await db.batch(late)
    } catch (error) {
      log.warn('materialize.counters-failed', { error })
    }
  }

  // One line per batch: what `npm run bench` reads to show round trips stay flat as batches grow.
  log.info('materialize.batch', { messages: batch.messages.length, d1RoundTrips: roundTrips() })

  await settleBatch(batch, settlements, {
    dlq: env.DLQ,
    log,
    fallbackDelaySeconds: config.RETRY_DELAYS_SECONDS.at(-1) ?? 30,
  })
}

/**
 * `notify_consumer_lag_seconds{source}`: how old the newest-processed events of
 * each source were (event time — occurredAt / created-at — else when the bridge
 * read them), the largest of this batch.
 */
function lagGauges(db: D1Database, items: readonly Item[], now: Date): D1PreparedStatement[] {
  const lag = new Map<string, number>()
  for (const { inbound, work } of items) {
    const { event } = work
    const at =
      event.contract === 'arthunt' ? event.envelope.occurredAt : (event.meta['created-at'] ?? inbound.receivedAt)
    const seconds = Math.max(0, (now.getTime() - Date.parse(at)) / 1000)
    lag.set(inbound.source, Math.max(lag.get(inbound.source) ?? 0, seconds))
  }
  return [...lag].map(([source, seconds]) => setGauge(db, GAUGES.consumerLag, { source }, seconds, now.toISOString()))
}

function contextQuery(items: readonly Item[]) {
  const userIds: string[] = []
  const kinds = new Set<string>()
  const decisionPersons: string[] = []
  let needPool = false
  for (const { work } of items) {
    const { intent } = work
    if (intent.type !== 'notify') continue
    kinds.add(intent.kind)
    if (intent.recipients === 'reviewer-pool') needPool = true
    else userIds.push(...intent.recipients.map((recipient) => recipient.userId))
    if (intent.decision) decisionPersons.push(intent.decision.person)
  }
  return {
    keys: items.map((item) => item.work.event.idempotencyKey),
    userIds,
    needPool,
    kinds: [...kinds] as never[],
    decisionPersons,
  }
}

function processedRow(item: Item, plan: Extract<Plan, { type: 'record' }>): ProcessedEvent {
  const { event, intent } = item.work
  return {
    idempotencyKey: event.idempotencyKey,
    eventId: event.eventId,
    contract: event.contract,
    eventType: event.eventType,
    kind: plan.kind ?? null,
    traceId: intent.type === 'notify' ? (intent.traceId ?? null) : null,
    outcome: plan.outcome,
    inbound: item.inbound,
  }
}

function ignoredRow(inbound: InboundEvent, identity: EventIdentity): ProcessedEvent | undefined {
  const { idempotencyKey, eventId, eventType, contract } = identity
  if (!idempotencyKey || !eventId || !eventType || !contract) return undefined
  return { idempotencyKey, eventId, eventType, contract, kind: null, traceId: null, outcome: 'ignored-event', inbound }
}

function identityOf(event: DecodedEvent) {
  const traceId =
    event.contract === 'arthunt' ? event.envelope.traceId : (event.meta['trace-id'] ?? event.meta.traceparent)
  return { eventId: event.eventId, eventType: event.eventType, idempotencyKey: event.idempotencyKey, traceId }
}

function describe(inbound: InboundEvent) {
  return { source: inbound.source, origin: inbound.origin, sourceMessageId: inbound.sourceMessageId }
}

function failureFields(settlement: Settlement) {
  return settlement.action === 'ack' ? {} : { code: settlement.code, error: settlement.error }
}
