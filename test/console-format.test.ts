/**
 * How the console writes durations and instants (src/console/format.ts,
 * src/console/time.tsx): durations in at most two human units, and each
 * instant as a `<time>` that carries its UTC instant and reads, without
 * JavaScript, as a UTC time to the minute. The browser's rewrite to its own
 * zone is tested in a real browser (test/node/console.test.ts).
 */
import { describe, expect, it } from 'vitest'
import { COUNT_CAP } from '../src/console/counts.ts'
import { cappedCount, duration, instantOf, NOT_A_VALUE, utcMinute, utcSecond } from '../src/console/format.ts'
import { FindingsPanel, HealthBanner } from '../src/console/health.tsx'
import { Layout } from '../src/console/layout.tsx'
import { MIN_REFRESH_SECONDS, REFRESH_SCRIPT, RefreshControl, refreshSeconds } from '../src/console/refresh.tsx'
import { LOCAL_TIME_SCRIPT, TextWithTimes, Time } from '../src/console/time.tsx'
import type { Finding } from '../src/health/findings.ts'

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
    const pause = {
      transport: 'resend',
      code: 'NTF_SEND_PERMANENT',
      reason: 'refused',
      since: '2026-12-02T06:54:13.000Z',
      probe_at: '2026-12-02T07:04:13.000Z',
    }
    const health = { providers: [{ transport: 'resend', state: 'paused' as const, pause }], waiting: 3 }
    const page = String(await Layout({ page: { nonce: 'n0nce', health }, title: 'Overview', children: '' }))
    expect(page).toContain(`<script nonce="n0nce">${LOCAL_TIME_SCRIPT}</script>`)
    expect(page).toContain(
      'since <time datetime="2026-12-02T06:54:13.000Z" title="2026-12-02 06:54:13 UTC" data-relative="">2026-12-02 06:54 UTC</time>',
    )
    expect(page).toContain('is due <time datetime="2026-12-02T07:04:13.000Z"')
  })
})

describe('a text with instants in it', () => {
  it("shows each ISO instant of a finding's message as a time, the rest as text, escaped", () => {
    const html = String(
      TextWithTimes({
        text: 'paused since 2026-12-02T06:54:13.120Z (<code>): next at 2026-12-02T07:04:13Z, or 2026-12-02 later',
      }),
    )
    expect(html).toBe(
      'paused since <time datetime="2026-12-02T06:54:13.120Z" title="2026-12-02 06:54:13 UTC">2026-12-02 06:54 UTC</time>' +
        ' (&lt;code&gt;): next at <time datetime="2026-12-02T07:04:13.000Z" title="2026-12-02 07:04:13 UTC">2026-12-02 07:04 UTC</time>' +
        ', or 2026-12-02 later',
    )
    expect(String(TextWithTimes({ text: 'no time here' }))).toBe('no time here')
  })
})

describe('a capped count', () => {
  it('reads as its number up to the cap, and as "10 000+" past it', () => {
    expect(cappedCount(0)).toBe('0')
    expect(cappedCount(COUNT_CAP)).toBe(String(COUNT_CAP))
    expect(plain(cappedCount(COUNT_CAP + 1))).toBe('10 000+')
  })
})

describe('the findings at the top of a page', () => {
  const findings: Finding[] = [
    { id: 'sender-placeholder', severity: 'blocker', message: 'the sender is a placeholder', fix: 'set EMAIL_FROM' },
    { id: 'cron-stale', severity: 'warning', message: 'last run 2026-12-02T06:54:13.000Z', fix: 'check the cron' },
    { id: 'delivery-events-subscription', severity: 'info', message: 'a note', fix: 'read the docs' },
  ]
  const admin = { name: 'admin token', role: 'admin', via: 'console' } as const
  const viewer = { name: 'viewer token', role: 'viewer', via: 'console' } as const

  it('gives an admin one line naming each blocker and warning and linking to their fixes; a viewer only how many', () => {
    const line = String(HealthBanner({ health: { findings }, operator: admin }))
    expect(line).toContain('<strong>Configuration: 1 blocker, 1 warning</strong>')
    expect(line).toContain('<code>sender-placeholder</code>, <code>cron-stale</code>')
    expect(line).not.toContain('delivery-events-subscription')
    expect(line).toContain('href="/console#findings"')
    const viewed = String(HealthBanner({ health: { findings }, operator: viewer }))
    expect(viewed).toContain('Configuration: 1 blocker, 1 warning')
    expect(viewed).not.toContain('sender-placeholder')
    expect(viewed).not.toContain('set EMAIL_FROM')
  })

  it('leaves the line out where the page lists the findings, and when only notes remain', () => {
    expect(String(HealthBanner({ health: { findings }, operator: admin, listed: true }))).toBe('')
    expect(String(HealthBanner({ health: { findings: findings.slice(2) }, operator: admin }))).toBe('')
  })

  it("lists each with its fix on the overview, its times as times; a viewer's overview counts them", () => {
    const panel = String(FindingsPanel({ findings, operator: admin }))
    expect(panel).toContain('data-finding="cron-stale"')
    expect(panel).toContain('last run <time datetime="2026-12-02T06:54:13.000Z"')
    expect(panel).toContain('Fix: <code>set EMAIL_FROM</code>')
    const viewed = String(FindingsPanel({ findings, operator: viewer }))
    expect(viewed).toContain('Configuration: 1 blocker, 1 warning')
    expect(viewed).not.toContain('data-finding')
  })
})

describe('a page that refreshes itself', () => {
  it('takes its interval from the address within bounds, "off", or else its default', () => {
    expect(refreshSeconds(undefined, 60)).toBe(60)
    expect(refreshSeconds(undefined, undefined)).toBeUndefined()
    expect(refreshSeconds('off', 60)).toBeUndefined()
    expect(refreshSeconds('15', undefined)).toBe(15)
    expect(refreshSeconds(String(MIN_REFRESH_SECONDS), 60)).toBe(MIN_REFRESH_SECONDS)
    for (const wrong of ['1', '4', '3601', '-5', '1e3', '15.5', 'soon', '']) expect(refreshSeconds(wrong, 60)).toBe(60)
  })

  it("keeps the address's other parameters in its form, and says when the page was rendered", () => {
    const form = String(
      RefreshControl({
        path: '/console/dead-letters',
        query: { code: 'NTF_X', q: '"quoted" <b>', refresh: '7' },
        seconds: 7,
        renderedAt: new Date('2026-12-02T06:54:13.000Z'),
      }),
    )
    expect(form).toContain('<form id="refresh" class="refresh" method="get" action="/console/dead-letters">')
    expect(form).toContain('<input type="hidden" name="code" value="NTF_X"/>')
    expect(form).toContain('<input type="hidden" name="q" value="&quot;quoted&quot; &lt;b&gt;"/>')
    expect(form).not.toContain('name="refresh" value="7"')
    // The interval in the address is offered and chosen, beside the usual ones.
    expect(form).toContain('<option value="7" selected="">every 7 s</option>')
    expect(form).toContain('<option value="60">every minute</option>')
    expect(form).toContain('Updated <time datetime="2026-12-02T06:54:13.000Z"')
  })

  it('reloads without JavaScript by a meta refresh inside noscript, and runs its script under the nonce', async () => {
    const page = String(await Layout({ page: { nonce: 'n0nce' }, title: 'Overview', children: '', refresh: 60 }))
    expect(page).toContain(
      '<noscript><meta http-equiv="refresh" content="60"></noscript></head><body data-refresh="60">',
    )
    expect(page).toContain(`<script nonce="n0nce">${LOCAL_TIME_SCRIPT}${REFRESH_SCRIPT}</script>`)
    const still = String(await Layout({ page: { nonce: 'n0nce' }, title: 'Dead letters', children: '' }))
    expect(still).not.toContain('http-equiv')
    expect(still).not.toContain('data-refresh')
    expect(still).not.toContain(REFRESH_SCRIPT)
  })
})
