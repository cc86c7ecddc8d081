import { maskEmails } from '@notify-edge/contracts'
import pino from 'pino'

/** Keys whose values never reach a log line. */
const REDACTED = ['email', 'displayName', 'DisplayName', 'reason', 'Reason', 'body', 'authorization', 'password']

function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return maskEmails(value)
  if (depth > 5 || typeof value !== 'object' || value === null) return value
  if (value instanceof Error) return { type: value.name, message: maskEmails(value.message) }
  if (Array.isArray(value)) return value.map((item) => scrub(item, depth + 1))
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [key, REDACTED.includes(key) ? '[redacted]' : scrub(item, depth + 1)]),
  )
}

/** A pino logger writing JSON lines, with e-mail addresses masked in messages and fields. */
export function createLogger(level: string, destination?: pino.DestinationStream): pino.Logger {
  return pino(
    {
      level,
      base: { service: 'notify-edge-bridge' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }), log: (object) => scrub(object) as Record<string, unknown> },
      hooks: {
        logMethod(args, method) {
          method.apply(
            this,
            args.map((arg) => (typeof arg === 'string' ? maskEmails(arg) : arg)) as Parameters<typeof method>,
          )
        },
      },
    },
    destination,
  )
}
