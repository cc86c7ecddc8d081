import { createHash } from 'node:crypto'
import { type InboundEvent, ORIGIN_MAX_CHARS, SOURCE_MESSAGE_ID_MAX_CHARS, utf8Length } from '@notify-edge/contracts'

/**
 * How much of a source's headers travels with an event. Headers are metadata:
 * bounding them keeps one producer's odd record (a 200 KB header, thousands of
 * them) from turning a small payload into a payload-too-large marker.
 */
export const HEADER_LIMITS = {
  /** Headers per event. */
  count: 64,
  /** Characters of a header name. */
  nameChars: 200,
  /** Characters of a header value. */
  valueChars: 4096,
  /** Bytes of all headers as JSON on the wire. */
  totalBytes: 32_768,
} as const

/** Added when headers were cut or dropped: how many, and the sha256 of all of them as the source had them. */
export const HEADERS_CUT = 'x-notify-edge-headers-cut'

/** Hex sha256 of a string's UTF-8 bytes or of bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex')
}

/** `text` cut to at most `max` UTF-16 units, never in the middle of a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text
  const last = text.charCodeAt(max - 1)
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)
}

/**
 * An identifier the ingest route accepts: itself when it is 1 to `max`
 * characters, else its beginning followed by the sha256 of the whole (so two
 * long ids stay apart and the operator can match the original); an empty one
 * becomes `whenEmpty`.
 */
export function boundedId(id: string, max: number, whenEmpty: string): string {
  const text = id.toWellFormed()
  if (text.length === 0) return whenEmpty.length === 0 ? 'empty' : boundedId(whenEmpty, max, 'empty')
  if (text.length <= max) return text
  const digest = `…sha256:${sha256Hex(id)}`
  return `${cut(text, max - digest.length)}${digest}`
}

/**
 * The headers within `HEADER_LIMITS`: names and values cut, headers past the
 * count or byte budget dropped, and when anything was, `x-notify-edge-headers-cut`
 * says how many with the sha256 of the originals (canonical JSON).
 */
export function boundedHeaders(headers: Record<string, string>): Record<string, string> {
  // No prototype: a header named `__proto__` or `constructor` is a header like any other.
  const out: Record<string, string> = Object.create(null)
  let bytes = 0
  let count = 0
  let changed = 0
  for (const [name, value] of Object.entries(headers)) {
    if (name === HEADERS_CUT) continue
    const boundedName = cut(name.toWellFormed(), HEADER_LIMITS.nameChars)
    const boundedValue = cut(String(value).toWellFormed(), HEADER_LIMITS.valueChars)
    const size = utf8Length(JSON.stringify(boundedName)) + utf8Length(JSON.stringify(boundedValue)) + 2
    if (boundedName.length === 0 || count >= HEADER_LIMITS.count || bytes + size > HEADER_LIMITS.totalBytes) {
      changed += 1
      continue
    }
    if (boundedName !== name || boundedValue !== value || Object.hasOwn(out, boundedName)) changed += 1
    out[boundedName] = boundedValue
    bytes += size
    count += 1
  }
  if (changed > 0) {
    const canonical = JSON.stringify(Object.entries(headers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    out[HEADERS_CUT] = `${changed} cut or dropped; sha256 of the original headers ${sha256Hex(canonical)}`
  }
  return out
}

/**
 * The event with every field the ingest route checks made valid — ids and
 * origin bounded (with a digest of what was cut), headers bounded — and the
 * payload untouched.
 */
export function wireSafe(event: InboundEvent): InboundEvent {
  const payloadDigest = () =>
    `sha256:${sha256Hex(Buffer.from(event.body, event.encoding === 'base64' ? 'base64' : 'utf8'))}`
  const origin = boundedId(event.origin, ORIGIN_MAX_CHARS, `${event.source}:unknown`)
  const sourceMessageId =
    event.sourceMessageId.length > 0 && event.sourceMessageId.length <= SOURCE_MESSAGE_ID_MAX_CHARS
      ? event.sourceMessageId.toWellFormed()
      : boundedId(event.sourceMessageId, SOURCE_MESSAGE_ID_MAX_CHARS, payloadDigest())
  return { ...event, origin, sourceMessageId, headers: boundedHeaders(event.headers) }
}

/** Serialized size of an event on the wire. */
export function wireSize(event: InboundEvent): number {
  return wireForm(event).size
}

/** An event as it goes on the wire, serialized once: its JSON and that JSON's size in bytes. */
export function wireForm(event: InboundEvent): { json: string; size: number } {
  const json = JSON.stringify(event)
  return { json, size: utf8Length(json) }
}
