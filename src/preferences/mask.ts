/**
 * Unsubscribe tokens out of what an operator may read without holding the
 * power to write. A token is a capability — `POST /u/{token}` opts its
 * recipient out with no other proof — so a viewer, who may change nothing,
 * must never be handed one: not in a notification's fields, not in its raw
 * MIME, not in a dead letter. Only an admin's revealed (and audited) read
 * carries the real link.
 */
import { unstructuredBody } from '../mail/header-fields.ts'

/**
 * A token as `signUnsubscribe` makes it, of any version: `v{n}.{payload}.{MAC}`
 * with a 43-character MAC. Nothing is required around it, so it is found inside
 * a link, a percent-encoded link and an HTML attribute alike; characters glued
 * after the MAC are taken too, or a reader could cut them off again.
 */
const TOKEN = /v\d+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43,}/g

/** What a masked token reads as: `https://…/u/[token]`. */
export const MASKED_TOKEN = '[token]'

/** `text` with every unsubscribe token replaced by `[token]`. */
export function maskUnsubscribeTokens(text: string): string {
  return text.replace(TOKEN, MASKED_TOKEN)
}

/** Whether `text` holds something shaped like an unsubscribe token. */
export function hasUnsubscribeToken(text: string): boolean {
  return maskUnsubscribeTokens(text) !== text
}

/** RFC 2047 encoded-words, B or Q. */
const ENCODED_WORD = /=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=/g

function decoderFor(charset: string): TextDecoder {
  try {
    return new TextDecoder(charset)
  } catch {
    return new TextDecoder('utf-8')
  }
}

/** A header field's body as a reader sees it: unfolded, its encoded-words decoded. */
function decodedField(body: string): string {
  return body
    .replace(/\r?\n(?=[ \t])/g, '')
    .replace(/(\?=)[ \t]+(?==\?)/g, '$1')
    .replace(ENCODED_WORD, (_, charset: string, encoding: string, text: string) => {
      const binary =
        encoding.toUpperCase() === 'B'
          ? safeAtob(text)
          : text
              .replaceAll('_', ' ')
              .replace(/=([0-9A-Fa-f]{2})/g, (__, hex: string) => String.fromCharCode(parseInt(hex, 16)))
      if (binary === undefined) return text
      return decoderFor(charset).decode(Uint8Array.from(binary, (char) => char.charCodeAt(0)))
    })
}

function safeAtob(text: string): string | undefined {
  try {
    return atob(text)
  } catch {
    return undefined
  }
}

/**
 * One header field (its first line and its folded continuations). A token in
 * plain text is masked where it stands; one hidden in encoded-words (a template
 * that put the link in the subject) is found in the decoded text, and the field
 * is written again, masked, as encoded-words.
 */
function maskedField(lines: string[], eol: string): string[] {
  const field = lines.join(eol)
  const colon = field.indexOf(':')
  if (colon <= 0 || !/=\?/.test(field)) return lines.map(maskUnsubscribeTokens)
  const name = field.slice(0, colon)
  const decoded = decodedField(field.slice(colon + 1).trim())
  if (!hasUnsubscribeToken(decoded)) return lines
  return `${name}: ${unstructuredBody(name, maskUnsubscribeTokens(decoded))}`.split('\r\n')
}

/** A header block (lines up to the empty one), field by field. */
function maskedHeaders(lines: string[], eol: string): string[] {
  const fields: string[][] = []
  for (const line of lines) {
    const last = fields.at(-1)
    if (last && /^[ \t]/.test(line)) last.push(line)
    else fields.push([line])
  }
  return fields.flatMap((field) => maskedField(field, eol))
}

/**
 * A base64 body, decoded: the bytes are read one character per byte, so the
 * token (ASCII) is found whatever the part's charset, and the body is written
 * again in lines of 76 only when something was masked.
 */
function maskedBase64(lines: string[]): string[] {
  const binary = safeAtob(lines.join('').replace(/\s+/g, ''))
  if (binary === undefined) return lines.map(maskUnsubscribeTokens)
  const masked = maskUnsubscribeTokens(binary)
  if (masked === binary) return lines
  return btoa(masked).match(/.{1,76}/g) ?? []
}

/**
 * A raw MIME message with every unsubscribe token masked: in its header fields
 * (`List-Unsubscribe`, or a subject that carries the link), and inside every
 * part, base64 or not — a token in a base64 part is plain to anyone who
 * decodes it, so masking the raw text alone would hide nothing. The structure,
 * boundaries and everything else stay as they were sent.
 */
export function maskUnsubscribeTokensInMime(raw: string): string {
  const eol = raw.includes('\r\n') ? '\r\n' : '\n'
  const lines = raw.split(eol)
  const boundaries = new Set<string>()
  const isDelimiter = (line: string) =>
    line.startsWith('--') && [...boundaries].some((b) => line === `--${b}` || line === `--${b}--`)
  const out: string[] = []
  let at = 0
  // Each round: a header block, its empty line, then a body up to the next delimiter.
  while (at < lines.length) {
    const headers: string[] = []
    while (at < lines.length && lines[at] !== '') headers.push(lines[at++] as string)
    out.push(...maskedHeaders(headers, eol))
    const head = headers.join('\n')
    for (const [, boundary] of head.matchAll(/boundary="?([^";\r\n]+)"?/gi)) boundaries.add(boundary as string)
    const base64 = /^content-transfer-encoding:[ \t]*base64[ \t]*$/im.test(head)
    if (at < lines.length) out.push(lines[at++] as string)
    const body: string[] = []
    while (at < lines.length && !isDelimiter(lines[at] as string)) body.push(lines[at++] as string)
    out.push(...(base64 ? maskedBase64(body) : body.map(maskUnsubscribeTokens)))
    // A closing delimiter is followed by an epilogue or the enclosing part's next delimiter, not by headers.
    while (at < lines.length && (lines[at] as string).endsWith('--') && isDelimiter(lines[at] as string)) {
      out.push(lines[at++] as string)
      while (at < lines.length && !isDelimiter(lines[at] as string))
        out.push(maskUnsubscribeTokens(lines[at++] as string))
    }
    if (at < lines.length) out.push(lines[at++] as string)
  }
  return out.join(eol)
}
