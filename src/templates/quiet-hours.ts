const DAY_SECONDS = 86_400

/** Seconds since local midnight at `at` in `timeZone`. */
export function localSeconds(at: Date, timeZone: string): number {
  const parts = new Intl.DateTimeFormat('en-GB', {
    timeZone,
    hourCycle: 'h23',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  }).formatToParts(at)
  const value = (type: string) => Number(parts.find((part) => part.type === type)?.value ?? 0)
  return value('hour') * 3600 + value('minute') * 60 + value('second')
}

/**
 * When quiet hours end for someone in `timeZone`, if `at` falls inside them;
 * `null` otherwise. The window is [start, end) in local minutes and may wrap
 * midnight (22:00–08:00). The end is found by adding local wall-clock time, so
 * on the night a clock changes it can be off by that change (at most an hour).
 *
 * @param startMinutes - minutes after local midnight when the window opens
 * @param endMinutes - minutes after local midnight when it closes
 */
export function quietHoursEnd(at: Date, timeZone: string, startMinutes: number, endMinutes: number): Date | null {
  if (startMinutes === endMinutes) return null
  const now = localSeconds(at, timeZone)
  const start = startMinutes * 60
  const end = endMinutes * 60
  const inside = start < end ? now >= start && now < end : now >= start || now < end
  if (!inside) return null
  let wait = end - now
  if (wait <= 0) wait += DAY_SECONDS
  return new Date(Math.floor(at.getTime() / 1000) * 1000 + wait * 1000)
}
