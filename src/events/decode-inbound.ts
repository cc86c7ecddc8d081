import { describeIssues, type InboundEvent, MarkerBodySchema, toFieldIssues } from '@notify-edge/contracts'
import { ArtHuntEnvelopeSchema, artHuntIdempotencyKey } from '../contracts/arthunt.ts'
import { PIN_CONTRACT_VERSION, PinHeadersSchema, pinIdempotencyKey } from '../contracts/pin.ts'
import type { FieldIssue, PipelineCode } from '../errors.ts'
import type { EventTypeDefinition, Family } from './define.ts'
import { eventTypeOf } from './registry.ts'

/** What is known about an event even when it is invalid: enough to find it again. */
export type EventIdentity = {
  contract?: Family | 'marker'
  eventType?: string
  eventId?: string
  idempotencyKey?: string
}

/** A valid event of a registered type. */
export type DecodedEvent = {
  /** Its family (the envelope it came in). */
  contract: Family
  eventType: string
  /** ArtHunt `envelope.eventId`, PIN `message-id` header. */
  eventId: string
  idempotencyKey: string
  /** `data` (ArtHunt) or the payload (PIN), valid for its type's schema. */
  payload: unknown
  /** When it happened: `envelope.occurredAt` or the `created-at` header, else when the bridge read it (ISO). */
  occurredAt: string
  traceId?: string
  /** The key its envelope (`cancellationKey`) or headers (`cancellation-key`) name, if any. */
  cancellationKey?: string
  warnings: string[]
  /** Its registered type: contract, kinds, intent. */
  definition: EventTypeDefinition
}

/** The result of decoding one inbound event. */
export type Decoded =
  | { status: 'valid'; event: DecodedEvent }
  /** A well-formed event of a type this version does not handle (a newer producer): acked, logged. */
  | { status: 'ignored'; reason: string; identity: EventIdentity }
  | { status: 'invalid'; code: PipelineCode; message: string; issues: FieldIssue[]; identity: EventIdentity }

type Payload = { ok: true; value: unknown } | { ok: false; issue: FieldIssue }

/**
 * Picks the contract by the event's shape, not its source (any source may carry
 * any contract), and validates it:
 * - body with an `envelope` → ArtHunt `{ envelope, data }`;
 * - body `{ notifyEdgeMarker }` → a marker the bridge sent in place of a payload;
 * - an `event-type` header → PIN profile event or contact upsert.
 *
 * Never throws.
 */
export function decodeInbound(event: InboundEvent): Decoded {
  const headers = lowerCaseKeys(event.headers)
  const payload = parsePayload(event)
  if (!payload.ok) return invalid('NTF_INVALID_PAYLOAD', [payload.issue], peekHeaders(headers))
  const body = payload.value
  if (isRecord(body) && 'envelope' in body) return decodeArtHunt(body, event.receivedAt)
  if (isRecord(body) && 'notifyEdgeMarker' in body) return decodeMarker(body, event)
  if (headers['event-type'] !== undefined) return decodePin(headers, body, event.receivedAt)
  return invalid(
    'NTF_INVALID_PAYLOAD',
    [
      {
        field: 'body',
        message:
          'unrecognised event shape: expected an ArtHunt {envelope, data} body or a PIN event with an event-type header',
      },
    ],
    {},
  )
}

/** What can be learned about an event without validating it, e.g. for a dead letter. Never throws. */
export function peekIdentity(event: InboundEvent): EventIdentity {
  const decoded = decodeInbound(event)
  if (decoded.status === 'valid') {
    const { contract, eventType, eventId, idempotencyKey } = decoded.event
    return { contract, eventType, eventId, idempotencyKey }
  }
  return decoded.identity
}

function decodeArtHunt(body: Record<string, unknown>, receivedAt: string): Decoded {
  const identity = peekArtHunt(body)
  const envelope = ArtHuntEnvelopeSchema.safeParse(body.envelope)
  const eventType = isRecord(body.envelope) ? body.envelope.eventType : undefined
  const definition = typeof eventType === 'string' ? eventTypeOf('arthunt', eventType) : undefined
  if (!definition) {
    if (envelope.success) {
      return { status: 'ignored', reason: `ArtHunt eventType "${envelope.data.eventType}" is not handled`, identity }
    }
    return invalid('NTF_INVALID_PAYLOAD', toFieldIssues(envelope.error, 'envelope'), identity)
  }
  const data = definition.schema.safeParse(body.data)
  const issues = [
    ...(envelope.success ? [] : toFieldIssues(envelope.error, 'envelope')),
    ...(data.success ? [] : toFieldIssues(data.error, 'data')),
  ]
  if (!envelope.success || !data.success) return invalid('NTF_INVALID_PAYLOAD', issues, identity)
  const { eventId, schemaVersion, occurredAt, traceId, cancellationKey } = envelope.data
  return valid(definition, {
    eventId,
    idempotencyKey: artHuntIdempotencyKey(definition.type, eventId),
    payload: data.data,
    occurredAt: occurredAt ?? receivedAt,
    traceId: traceId ?? undefined,
    cancellationKey: cancellationKey ?? undefined,
    warnings: schemaVersion === 1 ? [] : [`schemaVersion ${schemaVersion} is newer than 1; proceeding`],
  })
}

function decodePin(headers: Record<string, string>, body: unknown, receivedAt: string): Decoded {
  const identity = peekHeaders(headers)
  const meta = PinHeadersSchema.safeParse(headers)
  if (!meta.success) return invalid('NTF_INVALID_PAYLOAD', toFieldIssues(meta.error, 'headers'), identity)
  const eventType = meta.data['event-type']
  const definition = eventTypeOf('pin', eventType)
  if (!definition) return { status: 'ignored', reason: `PIN event-type "${eventType}" is not handled`, identity }
  const payload = definition.schema.safeParse(body)
  if (!payload.success) return invalid('NTF_INVALID_PAYLOAD', toFieldIssues(payload.error), identity)
  const version = meta.data['contract-version']
  const messageId = meta.data['message-id']
  return valid(definition, {
    eventId: messageId,
    idempotencyKey: pinIdempotencyKey(eventType, messageId),
    payload: payload.data,
    occurredAt: meta.data['created-at'] ?? receivedAt,
    traceId: meta.data['trace-id'] ?? meta.data.traceparent,
    cancellationKey: meta.data['cancellation-key'],
    warnings:
      version === undefined || version === PIN_CONTRACT_VERSION
        ? []
        : [`contract-version "${version}" differs from ${PIN_CONTRACT_VERSION}; proceeding`],
  })
}

function valid(
  definition: EventTypeDefinition,
  event: Omit<DecodedEvent, 'contract' | 'eventType' | 'definition'>,
): Decoded {
  const occurredAt = new Date(event.occurredAt).toISOString()
  return {
    status: 'valid',
    event: { ...event, occurredAt, contract: definition.family, eventType: definition.type, definition },
  }
}

function decodeMarker(body: Record<string, unknown>, event: InboundEvent): Decoded {
  const identity: EventIdentity = { contract: 'marker', eventId: event.sourceMessageId }
  const marker = MarkerBodySchema.safeParse(body)
  if (!marker.success) return invalid('NTF_INVALID_PAYLOAD', toFieldIssues(marker.error), identity)
  const { notifyEdgeMarker, size, sha256, reason } = marker.data
  const code: PipelineCode = notifyEdgeMarker === 'payload-too-large' ? 'NTF_PAYLOAD_TOO_LARGE' : 'NTF_INGEST_REJECTED'
  const message =
    notifyEdgeMarker === 'payload-too-large'
      ? `payload of ${size} bytes (sha256 ${sha256}) does not fit a queue message; the original stays at ${event.origin}`
      : `the ingest route refused this payload of ${size} bytes (sha256 ${sha256}): ${reason ?? 'no reason given'}; the original stays at ${event.origin}`
  return { status: 'invalid', code, message, issues: [{ field: 'body', message }], identity }
}

function parsePayload(event: InboundEvent): Payload {
  let text = event.body
  if (event.encoding === 'base64') {
    let bytes: Uint8Array
    try {
      bytes = Uint8Array.from(atob(event.body), (char) => char.charCodeAt(0))
    } catch {
      return { ok: false, issue: { field: 'body', message: 'encoding is base64 but the body is not valid base64' } }
    }
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes)
    } catch {
      return { ok: false, issue: { field: 'body', message: `body is not UTF-8 text (${bytes.byteLength} bytes)` } }
    }
  }
  try {
    // A leading byte-order mark is not JSON, but a decoder may ignore it (RFC 8259 §8.1); the bridge keeps it.
    return { ok: true, value: JSON.parse(text.startsWith('\ufeff') ? text.slice(1) : text) }
  } catch (error) {
    return { ok: false, issue: { field: 'body', message: `body is not JSON: ${(error as Error).message}` } }
  }
}

function invalid(code: PipelineCode, issues: FieldIssue[], identity: EventIdentity): Decoded {
  return { status: 'invalid', code, message: describeIssues(issues), issues, identity }
}

function peekArtHunt(body: Record<string, unknown>): EventIdentity {
  const envelope = isRecord(body.envelope) ? body.envelope : {}
  const eventId = typeof envelope.eventId === 'string' ? envelope.eventId.slice(0, 200) : undefined
  const eventType = typeof envelope.eventType === 'string' ? envelope.eventType.slice(0, 200) : undefined
  return {
    contract: 'arthunt',
    eventId,
    eventType,
    idempotencyKey: eventId && eventType ? artHuntIdempotencyKey(eventType, eventId) : undefined,
  }
}

function peekHeaders(headers: Record<string, string>): EventIdentity {
  const eventId = headers['message-id']?.slice(0, 200)
  const eventType = headers['event-type']?.slice(0, 200)
  if (eventId === undefined && eventType === undefined) return {}
  return {
    contract: 'pin',
    eventId,
    eventType,
    idempotencyKey: eventId && eventType ? pinIdempotencyKey(eventType, eventId) : undefined,
  }
}

function lowerCaseKeys(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  for (const [key, value] of Object.entries(headers)) out[key.toLowerCase()] = value
  return out
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
