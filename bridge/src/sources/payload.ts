// ignoreBOM: a leading byte-order mark is part of the payload and must survive the trip (bytes in, bytes out).
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** Lists the headers whose values were not UTF-8 and travel as base64. */
export const BASE64_HEADERS = 'x-notify-edge-base64-headers'

/** UTF-8 text of `bytes`, or undefined when they are not valid UTF-8. */
function utf8Text(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}

/**
 * A payload as an InboundEvent carries it: the exact bytes as stored, as
 * UTF-8 text when they are valid UTF-8, else base64. Whatever the content
 * type says, nothing is parsed or re-serialised.
 */
export function payloadOf(bytes: Uint8Array | null | undefined): { body: string; encoding?: 'base64' } {
  if (!bytes || bytes.byteLength === 0) return { body: '', encoding: 'base64' }
  const text = utf8Text(bytes)
  return text === undefined ? { body: Buffer.from(bytes).toString('base64'), encoding: 'base64' } : { body: text }
}

/**
 * Header values (Buffers, numbers, arrays) as strings, names lower-cased. A
 * value that is not UTF-8 travels as base64, its name listed in
 * `x-notify-edge-base64-headers`: decoding it lossily would let two different
 * binary ids become the same string.
 */
export function stringHeaders(headers: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  const base64: string[] = []
  for (const [rawName, value] of Object.entries(headers ?? {})) {
    if (value === undefined || value === null) continue
    const name = rawName.toLowerCase()
    let binary = false
    const text = (item: unknown): string => {
      if (Buffer.isBuffer(item)) {
        const decoded = utf8Text(item)
        if (decoded !== undefined) return decoded
        binary = true
        return item.toString('base64')
      }
      if (typeof item !== 'object') return String(item)
      // A nested table (AMQP) or a date: as JSON, with 64-bit integers as digits.
      return JSON.stringify(item, (_, nested) => (typeof nested === 'bigint' ? nested.toString() : nested)) ?? ''
    }
    out[name] = Array.isArray(value) ? value.map(text).join(',') : text(value)
    if (binary) base64.push(name)
  }
  if (base64.length > 0) out[BASE64_HEADERS] = base64.join(',')
  return out
}
