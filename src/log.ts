/**
 * JSON log lines for the Worker (one object per line, read by Workers Logs).
 *
 * Privacy is enforced here, not at call sites: every line's fields go through
 * the scrub the bridge uses too (`scrubLogFields` of @notify-edge/contracts),
 * so a careless field cannot leak an address, a display name or a rejection
 * reason. This is the one place in the Worker that writes to the console.
 */

import { type EventLogger, type LogLevel, maskEmails, scrubLogFields } from '@notify-edge/contracts'

export { maskEmails }

const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }

/** A logger that writes one JSON object per line: `{level, event, time, ...fields}`. */
export type Logger = EventLogger

/** Where a finished line goes. */
export type LineWriter = (level: LogLevel, line: string) => void

/** Errors to `console.error` and warnings to `console.warn`, so Workers Logs shows each at its level. */
const toConsole: LineWriter = (level, line) => {
  if (level === 'error') console.error(line)
  else if (level === 'warn') console.warn(line)
  else console.log(line)
}

/**
 * A logger at `level`; lines below it are skipped. `write` is the console
 * unless a test reads the lines itself. @defaultValue level "info"
 */
export function createLogger(level: LogLevel = 'info', write: LineWriter = toConsole): Logger {
  const at =
    (lineLevel: LogLevel) =>
    (event: string, fields: Record<string, unknown> = {}) => {
      if (LEVELS[lineLevel] < LEVELS[level]) return
      write(
        lineLevel,
        JSON.stringify({ level: lineLevel, event, time: new Date().toISOString(), ...scrubLogFields(fields) }),
      )
    }
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
}

/** The logger for this Worker's `LOG_LEVEL` (unknown values mean `info`, so a bad variable never silences errors). */
export function loggerFor(env: { LOG_LEVEL?: string } | undefined): Logger {
  const level = env?.LOG_LEVEL
  return createLogger(level !== undefined && level in LEVELS ? (level as LogLevel) : 'info')
}
