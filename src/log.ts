/**
 * JSON log lines for the Worker (one object per line, read by Workers Logs).
 *
 * Privacy is enforced here, not at call sites: values under personal keys are
 * dropped and anything shaped like an e-mail address is masked, so a careless
 * field cannot leak an address, a display name or a rejection reason.
 */

import { maskEmails } from '@notify-edge/contracts'

export { maskEmails }

type Level = 'debug' | 'info' | 'warn' | 'error'

const LEVELS: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 }

/** Keys whose values never reach a log line (compared case-insensitively). */
const REDACTED_KEYS = new Set([
  'email',
  'displayname',
  'reason',
  'recipient',
  'actor',
  'data',
  'payload',
  'body',
  'authorization',
])

function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return maskEmails(value)
  if (value instanceof Error) return { name: value.name, message: maskEmails(value.message) }
  if (depth > 4 || typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return value.map((item) => scrub(item, depth + 1))
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) {
    out[key] = REDACTED_KEYS.has(key.toLowerCase()) ? '[redacted]' : scrub(item, depth + 1)
  }
  return out
}

/** A logger that writes one JSON object per line. */
export type Logger = Record<Level, (event: string, fields?: Record<string, unknown>) => void>

/** A logger at `level`; lines below it are skipped. @defaultValue level "info" */
export function createLogger(level: Level = 'info'): Logger {
  const write =
    (at: Level) =>
    (event: string, fields: Record<string, unknown> = {}) => {
      if (LEVELS[at] < LEVELS[level]) return
      const line = JSON.stringify({ level: at, event, time: new Date().toISOString(), ...(scrub(fields) as object) })
      if (at === 'error') console.error(line)
      else if (at === 'warn') console.warn(line)
      else console.log(line)
    }
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') }
}

/** The logger for this Worker's `LOG_LEVEL` (unknown values mean `info`, so a bad variable never silences errors). */
export function loggerFor(env: { LOG_LEVEL?: string } | undefined): Logger {
  const level = env?.LOG_LEVEL
  return createLogger(level !== undefined && level in LEVELS ? (level as Level) : 'info')
}
