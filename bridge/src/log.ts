import { maskEmails, scrubLogFields } from '@notify-edge/contracts'
import pino from 'pino'

/**
 * A pino logger writing JSON lines. Its fields go through the scrub the
 * Worker's logger uses too (`scrubLogFields` of @notify-edge/contracts), and
 * e-mail addresses are masked in its messages.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): pino.Logger {
  return pino(
    {
      level,
      base: { service: 'notify-edge-bridge' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }), log: (object) => scrubLogFields(object) },
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
