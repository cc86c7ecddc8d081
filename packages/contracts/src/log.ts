/**
 * How the Worker and the bridge log: one call shape, `(event, fields)`, and
 * one scrub that every line's fields go through on both sides, so neither can
 * log what the other would have redacted.
 */
import { maskEmails } from './mask.ts'

/** The levels both loggers write. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error'

/** What a line says beyond its event name: plain values, never prose that quotes personal data. */
export type LogFields = Record<string, unknown>

/**
 * A logger of either side: one method per level, each taking a stable event
 * name (`area.what-happened`, e.g. `source.connected`, `notification.sent`)
 * and the fields that go with it.
 */
export type EventLogger = Record<LogLevel, (event: string, fields?: LogFields) => void>

/**
 * Keys whose values never reach a log line, at any depth, compared without
 * regard to case (`reason`, `Reason` and `REASON` alike): the personal data of
 * the events (an address, a display name, a rejection reason, whole payloads
 * and bodies that carry them, who a recipient or an operator is) and
 * credentials. `token` and `address` are here beside the lists both sides kept
 * before they shared one, so a field named for a secret or an address is never
 * written even before anyone thinks to mask it.
 */
export const LOG_REDACTED_KEYS: readonly string[] = [
  'email',
  'address',
  'displayName',
  'reason',
  'recipient',
  'actor',
  'data',
  'payload',
  'body',
  'authorization',
  'password',
  'token',
]

/** What a redacted value is written as. */
export const LOG_REDACTED_VALUE = '[redacted]'

const redacted = new Set(LOG_REDACTED_KEYS.map((key) => key.toLowerCase()))

/**
 * Levels of nesting the scrub walks. An object or a list deeper than this is
 * written as `LOG_TOO_DEEP_VALUE`, not as it is: a redacted key below it
 * would otherwise reach the line unread.
 */
const MAX_DEPTH = 5

/** What an object or a list nested deeper than the scrub walks is written as. */
export const LOG_TOO_DEEP_VALUE = '[too deep]'

/**
 * A log line's fields as they may be written: values under a redacted key
 * replaced by `[redacted]`, every string with its e-mail addresses masked,
 * and an `Error` reduced to its name and (masked) message, since its other
 * properties (a response body, a request) may hold anything.
 */
export function scrubLogFields(fields: LogFields): LogFields {
  return scrub(fields, 0) as LogFields
}

function scrub(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return maskEmails(value)
  if (value instanceof Error) return { name: value.name, message: maskEmails(value.message) }
  if (typeof value !== 'object' || value === null) return value
  if (depth > MAX_DEPTH) return LOG_TOO_DEEP_VALUE
  if (Array.isArray(value)) return value.map((item) => scrub(item, depth + 1))
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) {
    out[key] = redacted.has(key.toLowerCase()) ? LOG_REDACTED_VALUE : scrub(item, depth + 1)
  }
  return out
}
