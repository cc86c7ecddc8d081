/**
 * Time zones where it is night, or day, right now: for the demo and the
 * browser tests, which show quiet hours (QUIET_HOURS_START–QUIET_HOURS_END in
 * the recipient's own zone) at whatever hour they run. A recipient given the
 * night zone has an email held until the morning there; one given the day
 * zone has nothing held.
 */
import { localSeconds } from '../src/templates/quiet-hours.ts'

/**
 * One zone for each whole-hour offset from UTC−11 to UTC+14, none of them
 * keeping daylight saving time: any hour of the day is local time in one of
 * them. Which one is measured at run time (Intl), not assumed from the offset.
 */
const ZONES = [
  'Pacific/Kiritimati',
  'Pacific/Tongatapu',
  'Asia/Kamchatka',
  'Asia/Magadan',
  'Asia/Vladivostok',
  'Asia/Tokyo',
  'Asia/Shanghai',
  'Asia/Bangkok',
  'Asia/Dhaka',
  'Asia/Tashkent',
  'Asia/Dubai',
  'Europe/Moscow',
  'Africa/Johannesburg',
  'Africa/Lagos',
  'Atlantic/Reykjavik',
  'Atlantic/Cape_Verde',
  'America/Noronha',
  'America/Sao_Paulo',
  'America/Caracas',
  'America/Bogota',
  'Pacific/Galapagos',
  'America/Phoenix',
  'Pacific/Pitcairn',
  'Pacific/Gambier',
  'Pacific/Honolulu',
  'Pacific/Pago_Pago',
] as const

const DAY_MINUTES = 1440

/** Minutes after midnight of an `HH:MM`. */
function minutesOf(clock: string): number {
  const [hours, minutes] = clock.split(':').map(Number)
  return (hours ?? 0) * 60 + (minutes ?? 0)
}

/** Minutes between two times of day, the short way round midnight. */
function apart(a: number, b: number): number {
  const gap = Math.abs(a - b) % DAY_MINUTES
  return Math.min(gap, DAY_MINUTES - gap)
}

/** The local time of day at `at` in `timeZone`, as `HH:MM`. */
export function localClock(timeZone: string, at = new Date()): string {
  const minutes = Math.floor(localSeconds(at, timeZone) / 60)
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`
}

/** The zone whose local time at `at` is nearest `minutes` after midnight (within half an hour). */
export function zoneAt(minutes: number, at = new Date()): string {
  let best: { zone: string; off: number } | undefined
  for (const zone of ZONES) {
    const off = apart(localSeconds(at, zone) / 60, minutes)
    if (best === undefined || off < best.off) best = { zone, off }
  }
  return (best as { zone: string }).zone
}

/**
 * A zone where `at` is the middle of the quiet hours `start`–`end` (22:00–08:00: about 03:00 there), and
 * one where it is the middle of the rest of the day (about 15:00): each hours away from either end, so that
 * what a demo or a test does in the next minutes stays on its side.
 */
export function nightAndDayZones(start = '22:00', end = '08:00', at = new Date()): { night: string; day: string } {
  const [from, to] = [minutesOf(start), minutesOf(end)]
  const quiet = (to - from + DAY_MINUTES) % DAY_MINUTES
  return {
    night: zoneAt((from + quiet / 2) % DAY_MINUTES, at),
    day: zoneAt((to + (DAY_MINUTES - quiet) / 2) % DAY_MINUTES, at),
  }
}
