import { describeIssues, type InboundEvent, InboundEventSchema, toFieldIssues } from '../../contracts/index.ts'
import { decodeInbound, type EventIdentity } from '../../events/decode-inbound.ts'
import type { ProcessedEvent } from '../processed.ts'
import { describe, type EventItem, type EventsRun, identityOf, type Work } from '../run.ts'

/** A valid event, to plan. */
export type Valid = EventItem & { type: 'valid' }

/** A handled event type that asks for nothing, to record as processed (`row`) so that it stays deduplicated. */
export type Ignored = { type: 'ignored'; message: Message<unknown>; inbound: InboundEvent; row: ProcessedEvent }

/** What decoding lets through, in batch order. */
export type Decoded = Valid | Ignored

/**
 * Stage 1: decode and validate every message. An invalid one is a dead letter
 * naming its field; a handled type that asks for nothing is recorded as
 * ignored; the same event twice in one batch is one event; the rest is work.
 */
export function decodeStage(run: EventsRun, messages: readonly Message<unknown>[]): Decoded[] {
  const seen = new Set<string>()
  const decoded: Decoded[] = []
  for (const message of messages) {
    const parsed = InboundEventSchema.safeParse(message.body)
    if (!parsed.success) {
      const error = `not an InboundEvent: ${describeIssues(toFieldIssues(parsed.error))}`
      run.deadLetter({ message }, 'NTF_INVALID_PAYLOAD', error, { messageId: message.id })
      continue
    }
    const inbound = parsed.data
    const result = decodeInbound(inbound)
    if (result.status === 'invalid') {
      run.deadLetter({ message, inbound }, result.code, result.message, { ...describe(inbound), ...result.identity })
    } else if (result.status === 'ignored') {
      const ignored = ignore(run, message, inbound, result.identity, result.reason, seen)
      if (ignored) decoded.push(ignored)
    } else {
      const { event } = result
      for (const warning of event.warnings) {
        run.log.warn('event.contract-warning', { ...describe(inbound), eventId: event.eventId, warning })
      }
      // Debug only: the event's outcome line (event.enqueued, event.skipped-duplicate, …) carries
      // the same fields at info, and one line fewer per event is a third of the pipeline's log cost.
      run.log.debug('event.consumed', { ...describe(inbound), ...identityOf(event) })
      if (seen.has(event.idempotencyKey)) {
        duplicate(run, { message, inbound }, 'batch')
        continue
      }
      seen.add(event.idempotencyKey)
      const asked = event.definition.intent(event)
      // The kind's own key first; else the one the envelope or headers carry.
      const intent =
        asked.type === 'notify' && asked.cancellationKey === undefined && event.cancellationKey !== undefined
          ? { ...asked, cancellationKey: event.cancellationKey }
          : asked
      decoded.push({ type: 'valid', message, inbound, work: { event, source: inbound.source, intent } })
    }
  }
  return decoded
}

/** A duplicate ends here: acked, counted, logged (`by` batch, kv or d1). */
export function duplicate(
  run: EventsRun,
  item: { message: Message<unknown>; inbound: InboundEvent; work?: Work },
  by: string,
): void {
  const { inbound } = item
  run.ack(item)
  run.count(inbound.source, 'skipped-duplicate')
  const identity = item.work ? identityOf(item.work.event) : {}
  run.log.info('event.skipped-duplicate', { ...describe(inbound), ...identity, by })
}

/** An ignored event is counted and logged; it goes on to be recorded when it can be named, else it ends here. */
function ignore(
  run: EventsRun,
  message: Message<unknown>,
  inbound: InboundEvent,
  identity: EventIdentity,
  reason: string,
  seen: Set<string>,
): Ignored | undefined {
  run.count(inbound.source, 'ignored-event')
  run.log.info('event.ignored-event', { ...describe(inbound), ...identity, reason })
  const row = ignoredRow(inbound, identity)
  // Recorded (and deduplicated) when it can be named; otherwise there is nothing to remember.
  if (row && !seen.has(row.idempotencyKey)) {
    seen.add(row.idempotencyKey)
    return { type: 'ignored', message, inbound, row }
  }
  run.ack({ message, inbound })
  return undefined
}

function ignoredRow(inbound: InboundEvent, identity: EventIdentity): ProcessedEvent | undefined {
  const { idempotencyKey, eventId, eventType, contract } = identity
  if (!idempotencyKey || !eventId || !eventType || !contract) return undefined
  return { idempotencyKey, eventId, eventType, contract, kind: null, traceId: null, outcome: 'ignored-event', inbound }
}
