import type { Mail } from './mime.ts'

/** Why a built message cannot be sent: it is over a documented limit, and sending it again will not help. */
export type MessageLimitError = { code: 'NTF_MESSAGE_INVALID'; message: string }

// https://developers.cloudflare.com/email-service/platform/limits/ ("Email content limits"): "Subject line: 998
// characters". The page does not say how characters are counted; Unicode code points are what a reader counts.
export const MAX_SUBJECT_CHARACTERS = 998

// https://developers.cloudflare.com/email-service/platform/limits/ ("Email content limits"): "Total message size:
// 5 MiB, including attachments". Its 25 MiB holds only for verified destination addresses, which a recipient of a
// notification is not.
export const MAX_MESSAGE_BYTES = 5 * 1024 * 1024

// https://developers.cloudflare.com/email-service/reference/headers/ ("Header limits"): "Max header value length:
// 2,048 bytes" for each custom header (E_HEADER_VALUE_TOO_LONG).
export const MAX_HEADER_VALUE_BYTES = 2048

// https://developers.cloudflare.com/email-service/reference/headers/ ("Header limits"): "Total custom headers
// payload: 16 KB", counted as the sum of name + ': ' + value + CRLF (E_HEADERS_TOO_LARGE). The page does not say
// whether a KB is 1,000 or 1,024 bytes; the smaller is taken, so a message passed here is never refused for it.
// The same limit is on https://developers.cloudflare.com/email-service/platform/limits/ as "Header size: 16 KB".
export const MAX_CUSTOM_HEADER_BYTES = 16_000

// https://www.rfc-editor.org/rfc/rfc5322#section-2.1.1: each line MUST be no more than 998 characters, CRLF
// excluded. Not an Email Service number, but a line past it may be refused by any relay on the way.
export const MAX_LINE_CHARACTERS = 998

// https://developers.cloudflare.com/email-service/platform/limits/ ("Email content limits"): "Recipients (to, cc,
// bcc): 50 per email". Not checked: a Mail has exactly one recipient.

/**
 * Header fields that are not custom headers to the Email Service, so not in its
 * 16 KB and 2,048-byte counts: those it writes itself and those it takes from
 * its own API fields (https://developers.cloudflare.com/email-service/reference/headers/,
 * "Platform-controlled headers", and the From, To, Cc, Bcc, Subject and Reply-To fields).
 */
const NOT_CUSTOM = new Set([
  'date',
  'message-id',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'dkim-signature',
  'return-path',
  'received',
  'feedback-id',
  'tls-required',
  'tls-report-domain',
  'tls-report-submitter',
  'cfbl-address',
  'cfbl-feedback-id',
  'from',
  'to',
  'cc',
  'bcc',
  'subject',
  'reply-to',
])

const utf8 = new TextEncoder()

function bytesOf(text: string): number {
  return utf8.encode(text).length
}

/** The top-level header fields of a raw message, each with its value unfolded (RFC 5322 §2.2.3). */
function headerFieldsOf(raw: string): { name: string; value: string }[] {
  const end = raw.indexOf('\r\n\r\n')
  const head = end < 0 ? raw : raw.slice(0, end)
  return head.split(/\r\n(?![ \t])/).flatMap((field) => {
    const colon = field.indexOf(':')
    if (colon <= 0) return []
    return [
      {
        name: field.slice(0, colon),
        value: field
          .slice(colon + 1)
          .replace(/\r\n(?=[ \t])/g, '')
          .trimStart(),
      },
    ]
  })
}

function isCustom(name: string): boolean {
  const lower = name.toLowerCase()
  return !NOT_CUSTOM.has(lower) && !lower.startsWith('arc-')
}

const invalid = (message: string): MessageLimitError => ({ code: 'NTF_MESSAGE_INVALID', message })

/**
 * Checks a built message against the Email Service's documented limits (and
 * RFC 5322's line length) before it is sent, so that a message the service
 * would refuse fails here with the limit named instead of with the service's
 * error. Returns the first limit passed, or undefined. Its message names the
 * limit and the measured size, and never an address, a display name or a
 * header's value: those are personal data or secrets, and the message reaches
 * logs.
 */
export function checkMessageLimits(mail: Mail, raw: string): MessageLimitError | undefined {
  const size = bytesOf(raw)
  if (size > MAX_MESSAGE_BYTES) {
    return invalid(`the message is ${size} bytes, over the Email Service's limit of ${MAX_MESSAGE_BYTES} (5 MiB)`)
  }
  const subject = [...mail.subject].length
  if (subject > MAX_SUBJECT_CHARACTERS) {
    return invalid(`the subject is ${subject} characters, over the Email Service's limit of ${MAX_SUBJECT_CHARACTERS}`)
  }
  let custom = 0
  for (const { name, value } of headerFieldsOf(raw)) {
    if (!isCustom(name)) continue
    const valueBytes = bytesOf(value)
    if (valueBytes > MAX_HEADER_VALUE_BYTES) {
      return invalid(
        `the ${name} header's value is ${valueBytes} bytes, over the Email Service's limit of ${MAX_HEADER_VALUE_BYTES}`,
      )
    }
    custom += bytesOf(name) + 2 + valueBytes + 2
  }
  if (custom > MAX_CUSTOM_HEADER_BYTES) {
    return invalid(
      `the custom headers are ${custom} bytes together, over the Email Service's limit of ${MAX_CUSTOM_HEADER_BYTES} (16 KB)`,
    )
  }
  const lines = raw.split('\r\n')
  const long = lines.findIndex((line) => line.length > MAX_LINE_CHARACTERS)
  if (long >= 0) {
    return invalid(
      `line ${long + 1} is ${lines[long]?.length} characters, over RFC 5322's limit of ${MAX_LINE_CHARACTERS}`,
    )
  }
  return undefined
}
