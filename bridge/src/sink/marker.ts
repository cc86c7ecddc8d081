import type { InboundEvent, MarkerBody } from '@notify-edge/contracts'
import { sha256Hex, wireSafe } from './wire.ts'

/** Why an event travels as a marker. */
export type MarkerKind = MarkerBody['notifyEdgeMarker']

/** Bytes of the original payload a marker carries for the operator. */
const HEAD_BYTES = 1024

/** Characters of the route's reason a marker carries (the marker schema allows 4,000). */
const REASON_CHARS = 2000

/** Options of a marker. */
export type MarkerOptions = {
  /** Why the route refused the event, in its own words. */
  reason?: string
  /** Where the original stays, when that is not its `origin` (a broker's dead-letter queue). @defaultValue event.origin */
  keptAt?: string
  /**
   * Nothing but ASCII ids and the digest: the last resort when the route
   * refused even a marker (it never should; a newer route with stricter rules might).
   */
  minimal?: boolean
}

function payloadBytes(event: InboundEvent): Buffer {
  return Buffer.from(event.body, event.encoding === 'base64' ? 'base64' : 'utf8')
}

/**
 * The marker that replaces an event the Worker cannot take as it is: size,
 * sha256 and the first 1 KB of the payload, and in `origin` where the original
 * stays. The Worker dead-letters it (NTF_PAYLOAD_TOO_LARGE, NTF_INGEST_REJECTED)
 * so the operator sees it. Every field is bounded so that the ingest route
 * accepts it whatever the original held: ids and headers as `wireSafe` makes
 * them, the body a few KB at most.
 */
export function markerFor(event: InboundEvent, kind: MarkerKind, options: MarkerOptions = {}): InboundEvent {
  const bytes = payloadBytes(event)
  const reason = options.reason?.toWellFormed().slice(0, REASON_CHARS).toWellFormed()
  const marker: MarkerBody = {
    notifyEdgeMarker: kind,
    size: bytes.byteLength,
    sha256: sha256Hex(bytes),
    head: options.minimal ? '' : bytes.subarray(0, HEAD_BYTES).toString('utf8'),
    ...(reason ? { reason: options.minimal ? ascii(reason) : reason } : {}),
  }
  const safe = wireSafe({ ...event, origin: options.keptAt ?? event.origin })
  const body = JSON.stringify(marker)
  if (!options.minimal) return { ...safe, body, encoding: 'utf8' }
  return {
    ...safe,
    origin: ascii(safe.origin),
    sourceMessageId: `sha256:${sha256Hex(event.sourceMessageId)}`,
    headers: {},
    body,
    encoding: 'utf8',
  }
}

/** Printable ASCII only: what no validator of ids or text refuses. */
function ascii(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?') || '?'
}
