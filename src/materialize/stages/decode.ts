import {
  decodeInbound,
  describeIssues,
  type EventIdentity,
  type InboundEvent,
  InboundEventSchema,
  toFieldIssues,
} from '../../contracts/index.ts'
import { type BatchRun, describe, type Entry, identityOf } from '../batch.ts'
import type { ProcessedEvent } from '../processed.ts'

/**
 * Stage 1: decode and validate every message. An invalid one is a dead letter
 * naming its field; a handled type that asks for nothing is recorded as
 * ignored; the same event twice in one batch is one event; the rest is work.
 */
export function decodeStage(run: BatchRun): void {
  const seen = new Set<string>()
  for (const entry of run.entries) {
    const parsed = InboundEventSchema.safeParse(entry.message.body)
    if (!parsed.success) {
      const error = `not an InboundEvent: ${describeIssues(toFieldIssues(parsed.error))}`
      run.deadLetter(entry, 'NTF_INVALID_PAYLOAD', error, { messageId: entry.message.id })
      continue
    }
    const inbound = parsed.data
    entry.inbound = inbound
    const decoded = decodeInbound(inbound)
    if (decoded.status === 'invalid') {
      run.deadLetter(entry, decoded.code, decoded.message, { ...describe(inbound), ...decoded.identity })
    } else if (decoded.status === 'ignored') {
      ignore(run, entry, inbound, decoded.identity, decoded.reason, seen)
    } else {
      const { event } = decoded
      for (const warning of event.warnings) {
        run.log.warn('event.contract-warning', { ...describe(inbound), eventId: event.eventId, warning })
      }
      // Debug only: the event's outcome line (event.enqueued, event.skipped-duplicate, …) carries
      // the same fields at info, and one line fewer per event is a third of the pipeline's log cost.
      run.log.debug('event.consumed', { ...describe(inbound), ...identityOf(event) })
      if (seen.has(event.idempotencyKey)) {
        duplicate(run, entry, 'batch')
        continue
      }
      seen.add(event.idempotencyKey)
      const intent = event.definition.intent(event)
      entry.work = { event, source: inbound.source, attempts: entry.message.attempts, intent }
    }
  }
}

/** A duplicate ends here: acked, counted, logged (`by` batch, kv or d1). */
export function duplicate(run: BatchRun, entry: Entry, by: string): void {
  const inbound = entry.inbound as InboundEvent
  run.ack(entry)
  run.count(inbound.source, 'skipped-duplicate')
  const identity = entry.work ? identityOf(entry.work.event) : {}
  run.log.info('event.skipped-duplicate', { ...describe(inbound), ...identity, by })
}

function ignore(
  run: BatchRun,
  entry: Entry,
  inbound: InboundEvent,
  identity: EventIdentity,
  reason: string,
  seen: Set<string>,
) {
  run.count(inbound.source, 'ignored-event')
  run.log.info('event.ignored-event', { ...describe(inbound), ...identity, reason })
  const row = ignoredRow(inbound, identity)
  // Recorded (and deduplicated) when it can be named; otherwise there is nothing to remember.
  if (row && !seen.has(row.idempotencyKey)) {
    seen.add(row.idempotencyKey)
    entry.ignored = row
  } else run.ack(entry)
}

function ignoredRow(inbound: InboundEvent, identity: EventIdentity): ProcessedEvent | undefined {
  const { idempotencyKey, eventId, eventType, contract } = identity
  if (!idempotencyKey || !eventId || !eventType || !contract) return undefined
  return { idempotencyKey, eventId, eventType, contract, kind: null, traceId: null, outcome: 'ignored-event', inbound }
}
