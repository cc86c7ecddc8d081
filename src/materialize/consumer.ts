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
import { COUNTERS, CounterBatch, GAUGES, setGauge } from '../metrics/counters.ts'
import { type Settlement, settleFailure } from '../queue/policy.ts'
import { type Outgoing, sendAll } from '../queue/send.ts'
import { settleBatch } from '../queue/settle.ts'
import { loadContext } from './context.ts'
import { intentOf } from './kinds.ts'
import { readKvMarks, writeKvMarks } from './kv.ts'
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
 * write. Every message ends in exactly one ack, retry or dead letter; this
 * function never throws.
 */
export async function consumeEvents(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const config = configOf(env)
  const now = new Date()
  const nowIso = now.toISOString()
  const claim = crypto.randomUUID()
  const settlements = new Map<Message<unknown>, Settlement>()
  const counters = new CounterBatch()
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
      work: { event, source: inbound.source, attempts: message.attempts, intent: intentOf(event) },
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

  // 3. Read what planning needs (one D1 round trip), then plan each event.
  const planned: Planned[] = []
  if (fresh.length > 0) {
    try {
      const context = await loadContext(env.DB, contextQuery(fresh))
      for (const item of fresh) {
        const plan = await planEvent(item.work, context, config, now)
        if (plan.type === 'fail') {
          const kind = item.work.intent.type === 'notify' ? item.work.intent.kind : undefined
          fail(item.message, plan.error, { ...describe(item.inbound), ...identityOf(item.work.event) }, kind)
        } else planned.push({ ...item, plan })
      }
    } catch (cause) {
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 read: ${(cause as Error).message}`, { cause })
      for (const item of fresh)
        fail(item.message, error, { ...describe(item.inbound), eventId: item.work.event.eventId })
    }
  }

  // 4. Persist: processed marks, notifications, contacts and counters in one D1 batch.
  const records = planned.filter((item) => item.plan.type === 'record')
  const statements: D1PreparedStatement[] = []
  const processedIndex = new Map<Message<unknown>, number>()
  for (const { message, row } of ignoredRows) {
    processedIndex.set(message, statements.length)
    statements.push(insertProcessedEvent(env.DB, row, nowIso, claim))
  }
  for (const item of records) {
    const plan = item.plan as Extract<Plan, { type: 'record' }>
    const { event } = item.work
    const guard = { idempotencyKey: event.idempotencyKey, claim }
    processedIndex.set(item.message, statements.length)
    statements.push(insertProcessedEvent(env.DB, processedRow(item, plan), nowIso, claim))
    // notify_notifications_total follows these rows by trigger (migration 0004).
    for (const row of plan.notifications) statements.push(insertNotification(env.DB, row, nowIso))
    if (plan.contact) statements.push(upsertContact(env.DB, plan.contact, nowIso))
    counters.add(COUNTERS.events, { source: item.inbound.source, outcome: plan.outcome }, 1, guard)
  }
  for (const item of planned) {
    if (item.plan.type === 'duplicate')
      counters.add(COUNTERS.events, { source: item.inbound.source, outcome: 'skipped-duplicate' })
  }
  statements.push(...counters.statements(env.DB), ...lagGauges(env.DB, fresh, now))

  let committed = true
  let results: D1Result[] = []
  if (statements.length > 0) {
    try {
      results = await env.DB.batch(statements)
    } catch (cause) {
      committed = false
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 write: ${(cause as Error).message}`, { cause })
      for (const { message, row } of ignoredRows)
        fail(message, error, { ...describe(row.inbound), eventId: row.eventId })
      for (const item of records)
        fail(item.message, error, { ...describe(item.inbound), eventId: item.work.event.eventId })
    }
  }

  // 5. Dispatch: one message per pending notification, and again for pending ones of duplicates.
  const dispatches = new Map<Message<unknown>, Outgoing[]>()
  for (const item of planned) {
    const { plan } = item
    if (plan.type === 'duplicate') {
      dispatches.set(
        item.message,
        plan.redispatch.map((row) => dispatchFor(row.id, row.scheduledAt, now)),
      )
    } else if (committed && plan.type === 'record') {
      const pending = plan.notifications.filter((row) => row.status === 'pending')
      dispatches.set(
        item.message,
        pending.map((row) => dispatchFor(row.id, row.scheduledAt, now)),
      )
    }
  }
  const outgoing = [...dispatches.values()].flat()
  let dispatched = true
  if (outgoing.length > 0) {
    try {
      await sendAll(env.DISPATCH, outgoing)
    } catch (cause) {
      dispatched = false
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `notify-dispatch: ${(cause as Error).message}`, {
        cause,
      })
      // Committed events come back as duplicates and dispatch their pending notifications again.
      for (const [message, list] of dispatches) {
        if (list.length > 0) fail(message, error, { messageId: message.id, stage: 'dispatch' })
      }
    }
  }

  // 6. Outcomes; KV marks only for keys that are committed and dispatched.
  const done: string[] = []
  for (const item of planned) {
    const { plan, message } = item
    if (settlements.has(message)) continue
    if (plan.type === 'duplicate') {
      skipDuplicate(message, item.inbound, item.work.event, 'd1')
      if (plan.redispatch.length > 0)
        log.info('event.redispatched', { ...identityOf(item.work.event), count: plan.redispatch.length })
    } else if (plan.type === 'record') {
      const won = (results[processedIndex.get(message) ?? -1]?.meta.changes ?? 0) > 0
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
  if (committed && dispatched) await writeKvMarks(env.IDEMPOTENCY, done, config.IDEMPOTENCY_TTL_DAYS, log)

  // One line per batch: what `npm run bench` reads to show round trips stay flat as batches grow.
  log.info('materialize.batch', {
    messages: batch.messages.length,
    d1RoundTrips: d1RoundTrips(fresh.length, statements.length),
  })

  await settleBatch(batch, settlements, {
    dlq: env.DLQ,
    log,
    fallbackDelaySeconds: config.RETRY_DELAYS_SECONDS.at(-1) ?? 30,
  })
}

/** D1 round trips this consumer made for a batch: the context read (if any event needed it) and the write. */
function d1RoundTrips(fresh: number, statements: number): number {
  return (fresh > 0 ? 1 : 0) + (statements > 0 ? 1 : 0)
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
