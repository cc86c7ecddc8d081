/**
 * How the console writes durations and instants (src/console/format.ts,
 * src/console/time.tsx): durations in at most two human units, and each
 * instant as a `<time>` that carries its UTC instant and reads, without
 * JavaScript, as a UTC time to the minute. The browser's rewrite to its own
 * zone is tested in a real browser (test/node/console.test.ts).
 */
import { describe, expect, it } from 'vitest'
import { duration, instantOf, NOT_A_VALUE, utcMinute, utcSecond } from '../src/console/format.ts'
import { Layout } from '../src/console/layout.tsx'
import { LOCAL_TIME_SCRIPT, Time } from '../src/console/time.tsx'

/** The text with its non-breaking spaces as plain ones, to compare with what a reader sees. */
const plain = (text: string) => text.replaceAll('\u00a0', ' ')

describe('duration', () => {
  it.each([
    [0, '0 s'],
    [0.4, '0 s'],
    [59, '59 s'],
    [59.9, '59 s'],
    [60, '1 min'],
    [180, '3 min'],
    [3599, '59 min'],
    [3600, '1 h'],
    [2 * 3600 + 5 * 60, '2 h 5 min'],
    [2 * 3600 + 5 * 60 + 59, '2 h 5 min'],
    [86_399, '23 h 59 min'],
    [2 * 86_400, '2 d'],
    [2 * 86_400 + 3 * 3600 + 120, '2 d 3 h'],
    // The consumer lag an operator once read as "12010552.2".
    [12_010_552.2, '139 d'],
  ])('%s s reads "%s"', (seconds, text) => {
    expect(plain(duration(seconds))).toBe(text)
  })

  it('keeps a negative span’s sign, and reads NaN and the infinities as a dash', () => {
    expect(plain(duration(-180))).toBe('-3 min')
    expect(plain(duration(-0))).toBe('0 s')
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(duration(value)).toBe(NOT_A_VALUE)
    }
  })

  it('never wraps a number away from its unit', () => {
    expect(duration(7500)).toBe('2\u00a0h 5\u00a0min')
  })
})

describe('instants', () => {
  it('reads ISO times and SQLite’s zoneless ones as UTC; anything else is none', () => {
    expect(instantOf('2026-12-02T06:54:13.123Z')?.toISOString()).toBe('2026-12-02T06:54:13.123Z')
    expect(instantOf('2026-12-02 06:54:13')?.toISOString()).toBe('2026-12-02T06:54:13.000Z')
    expect(instantOf('2026-12-02T09:54:13+03:00')?.toISOString()).toBe('2026-12-02T06:54:13.000Z')
    for (const value of [null, undefined, '', 'soon', 42]) expect(instantOf(value)).toBeUndefined()
  })

  it('writes the UTC time to the minute for the page and to the second for the hover', () => {
    const at = new Date('2026-12-02T06:54:13.123Z')
    expect(utcMinute(at)).toBe('2026-12-02 06:54 UTC')
    expect(utcSecond(at)).toBe('2026-12-02 06:54:13 UTC')
  })
})

describe('<Time>', () => {
  it('carries the UTC instant in its datetime and title, and reads as the UTC time without JavaScript', () => {
    expect(String(Time({ at: '2026-12-02T06:54:13.123Z' }))).toBe(
      '<time datetime="2026-12-02T06:54:13.123Z" title="2026-12-02 06:54:13 UTC">2026-12-02 06:54 UTC</time>',
    )
  })

  it('marks a time of a list as relative, for the browser to write "… ago"', () => {
    expect(String(Time({ at: '2026-12-02 06:54:13', relative: true }))).toBe(
      '<time datetime="2026-12-02T06:54:13.000Z" title="2026-12-02 06:54:13 UTC" data-relative="">2026-12-02 06:54 UTC</time>',
    )
  })

  it('renders nothing for a missing time, and an unparsable one as stored, escaped', () => {
    expect(String(Time({ at: null }))).toBe('')
    expect(String(Time({ at: '<soon>' }))).toBe('&lt;soon&gt;')
  })
})

describe('a page', () => {
  it('runs the times’ script under its CSP nonce, and a paused transport’s banner says since when and until when as times', async () => {
    const paused = {
      transport: 'resend',
      code: 'NTF_SEND_PERMANENT',
      since: '2026-12-02T06:54:13.000Z',
      probeAt: '2026-12-02T07:04:13.000Z',
      waiting: 3,
    }
    const page = String(await Layout({ page: { nonce: 'n0nce', paused }, title: 'Overview', children: '' }))
    expect(page).toContain(`<script nonce="n0nce">${LOCAL_TIME_SCRIPT}</script>`)
    expect(page).toContain(
      'since <time datetime="2026-12-02T06:54:13.000Z" title="2026-12-02 06:54:13 UTC" data-relative="">2026-12-02 06:54 UTC</time>',
    )
    expect(page).toContain('is due <time datetime="2026-12-02T07:04:13.000Z"')
  })
})
