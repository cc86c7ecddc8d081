/**
 * JSON log lines for the bridge (pino), called as the Worker's are:
 * `log.warn('sink.failed', { status, waitMs })`. Each line carries its event
 * name twice — as `event`, the key the Worker's lines use, so one query finds
 * both sides, and as pino's `msg`, which pino's own tools show.
 *
 * Privacy is enforced here, not at call sites: every line's fields, and a
 * child logger's bindings, go through the scrub the Worker uses too
 * (`scrubLogFields` of @notify-edge/contracts). pino's `redact` option is not
 * used: it takes paths, and the shared list is of keys at any depth and in
 * any case.
 */
import { type EventLogger, type LogFields, type LogLevel, maskEmails, scrubLogFields } from '@notify-edge/contracts'
import pino from 'pino'

/** The bridge's logger: the Worker's call shape, plus child loggers that add fields to every line (`{ source: 'kafka' }`). */
export type Logger = EventLogger & { child(bindings: LogFields): Logger }

/** A logger at `level` (pino's levels, `silent` among them) writing to `destination`, else stdout. */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return eventLogger(
    pino(
      {
        level,
        base: { service: 'notify-edge-bridge' },
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }), log: (object) => scrubLogFields(object) },
      },
      destination,
    ),
  )
}

function eventLogger(log: pino.Logger): Logger {
  const at =
    (level: LogLevel) =>
    (event: string, fields: LogFields = {}) =>
      // The event name is a literal at every call site; masked all the same, as the Worker's fields are.
      log[level]({ event, ...fields }, maskEmails(event))
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    // pino's `bindings` formatter applies to the root logger's base only, never to a child's bindings.
    child: (bindings) => eventLogger(log.child(scrubLogFields(bindings))),
  }
}
