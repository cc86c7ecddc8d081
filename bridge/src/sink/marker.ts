import { createHash } from 'node:crypto'
import {
  INBOUND_EVENT_MAX_BYTES,
  type InboundEvent,
  type MarkerBody,
  utf8Length,
} from '../../../src/contracts/index.ts'

/** Bytes of the original payload a marker carries for the operator. */
const HEAD_BYTES = 1024

function payloadBytes(event: InboundEvent): Buffer {
  return Buffer.from(event.body, event.encoding === 'base64' ? 'base64' : 'utf8')
}

/**
 * The marker that replaces an event (DESIGN §2): size, sha256 and the first
 * 1 KB of the payload; the Worker dead-letters it so the operator sees it,
 * and the original stays at its source.
 */
export function markerFor(event: InboundEvent, kind: MarkerBody['notifyEdgeMarker'], reason?: string): InboundEvent {
  const bytes = payloadBytes(event)
  const marker: MarkerBody = {
    notifyEdgeMarker: kind,
    size: bytes.byteLength,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    head: bytes.subarray(0, HEAD_BYTES).toString('utf8'),
    ...(reason ? { reason: reason.slice(0, 4000) } : {}),
  }
  const headers = Object.fromEntries(
    Object.entries(event.headers)
      .slice(0, 50)
      .map(([k, v]) => [k.slice(0, 200), v.slice(0, 1000)]),
  )
  return { ...event, headers, body: JSON.stringify(marker), encoding: 'utf8' }
}

/** Serialized size of an event on the wire. */
export function wireSize(event: InboundEvent): number {
  return utf8Length(JSON.stringify(event))
}

/** The event, or its payload-too-large marker when it cannot travel as one queue message. */
export function fitForQueue(event: InboundEvent): InboundEvent {
  return wireSize(event) <= INBOUND_EVENT_MAX_BYTES ? event : markerFor(event, 'payload-too-large')
}
