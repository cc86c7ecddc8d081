/**
 * Durations and instants as an on-call operator reads them: "3 min" rather
 * than 180.0 seconds, "2026-12-02 06:54 UTC" rather than an ISO string. The
 * Worker does not know the browser's time zone, so instants are written in
 * UTC here and rewritten to the browser's zone by the page's script
 * (time.tsx); these texts are what a page shows with JavaScript off.
 */
import { COUNT_CAP } from './counts.ts'

/** A non-breaking space: a number never wraps away from its unit. */
const NBSP = '\u00a0'

/** Shown for a duration or an instant that is not one (NaN, an unparsable text). */
export const NOT_A_VALUE = '—'

/**
 * A span of seconds in at most two units, rounded down: `0 s`, `59 s`,
 * `3 min`, `2 h 5 min`, `2 d`, `139 d 4 h`. Below an hour, seconds are noise
 * and dropped; a zero second unit is left out (`2 h`, not `2 h 0 min`).
 * A negative span keeps its sign (`-3 min`: a clock ahead of another, which
 * an operator should see rather than a zero); NaN or an infinity reads `—`.
 * Number and unit are joined by a non-breaking space.
 */
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return NOT_A_VALUE
  if (seconds < 0) return `-${duration(-seconds)}`
  const whole = Math.floor(seconds)
  const unit = (value: number, name: string) => `${value}${NBSP}${name}`
  const pair = (big: number, bigName: string, small: number, smallName: string) =>
    small > 0 ? `${unit(big, bigName)} ${unit(small, smallName)}` : unit(big, bigName)
  if (whole < 60) return unit(whole, 's')
  if (whole < 3600) return unit(Math.floor(whole / 60), 'min')
  if (whole < 86_400) return pair(Math.floor(whole / 3600), 'h', Math.floor((whole % 3600) / 60), 'min')
  return pair(Math.floor(whole / 86_400), 'd', Math.floor((whole % 86_400) / 3600), 'h')
}

/**
 * The instant of a stored time, or undefined when it is none (a number is not
 * one: D1 rows type their columns loosely). Stored times
 * are ISO strings in UTC; SQLite's own `YYYY-MM-DD HH:MM:SS` (no zone) is UTC
 * too, and read as such rather than in the runtime's zone.
 */
export function instantOf(value: string | number | null | undefined): Date | undefined {
  if (typeof value !== 'string' || value === '') return undefined
  const text = value.trim()
  const zoned = /(Z|[+-]\d\d:?\d\d)$/i.test(text) ? text : `${text.replace(' ', 'T')}Z`
  const at = new Date(zoned)
  return Number.isNaN(at.getTime()) ? undefined : at
}

/** `2026-12-02 06:54 UTC`: an instant to the minute, the text a page shows without JavaScript. */
export function utcMinute(at: Date): string {
  return `${at.toISOString().slice(0, 16).replace('T', ' ')} UTC`
}

/** `2026-12-02 06:54:13 UTC`: an instant to the second, the hover text of every time. */
export function utcSecond(at: Date): string {
  return `${at.toISOString().slice(0, 19).replace('T', ' ')} UTC`
}

/** A count read with `LIMIT COUNT_CAP + 1` (./counts.ts): its number, or "10 000+" when the cap was reached. */
export function cappedCount(value: number): string {
  return value > COUNT_CAP ? `${COUNT_CAP.toLocaleString('en').replaceAll(',', NBSP)}+` : String(value)
}
