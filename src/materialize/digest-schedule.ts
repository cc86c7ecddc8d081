import type { DigestSchedule } from '../events/define.ts'
import { localSeconds } from '../templates/quiet-hours.ts'

const DAY_SECONDS = 86_400

/**
 * When a digest opened at `openedAt` closes: a window closes its minutes
 * later; a daily digest at the next `HH:MM` in the recipient's `timeZone`
 * strictly after it opened (as quiet hours, found by adding local wall-clock
 * time, so off by at most an hour on the night a clock changes).
 * `overrideSeconds` (DIGEST_WINDOW_SECONDS) replaces either schedule.
 */
export function digestCloseAt(
  schedule: DigestSchedule,
  openedAt: Date,
  timeZone: string,
  overrideSeconds?: number,
): Date {
  const opened = Math.floor(openedAt.getTime() / 1000) * 1000
  if (overrideSeconds !== undefined) return new Date(opened + overrideSeconds * 1000)
  if ('window' in schedule) return new Date(opened + schedule.window.minutes * 60_000)
  const [hours, minutes] = schedule.daily.at.split(':').map(Number) as [number, number]
  let wait = hours * 3600 + minutes * 60 - localSeconds(openedAt, timeZone)
  if (wait <= 0) wait += DAY_SECONDS
  return new Date(opened + wait * 1000)
}
