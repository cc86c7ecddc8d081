import { createHash } from 'node:crypto'

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })

/** A payload as an InboundEvent carries it: UTF-8 text, else base64. */
export function payloadOf(bytes: Buffer | null | undefined): { body: string; encoding?: 'base64' } {
  if (!bytes || bytes.byteLength === 0) return { body: '', encoding: 'base64' }
  try {
    return { body: utf8.decode(bytes) }
  } catch {
    return { body: bytes.toString('base64'), encoding: 'base64' }
  }
}

/** Hex sha256, the source message id of a message that carries none. */
export function sha256Hex(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** Header values (Buffers, numbers, arrays) as strings, names lower-cased. */
export function stringHeaders(headers: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined || value === null) continue
    const text = (item: unknown) =>
      Buffer.isBuffer(item) ? item.toString('utf8') : typeof item === 'object' ? JSON.stringify(item) : String(item)
    out[name.toLowerCase()] = Array.isArray(value) ? value.map(text).join(',') : text(value)
  }
  return out
}
