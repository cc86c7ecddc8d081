/**
 * The overview's charts and rates: the cron buckets the counters the
 * pipeline keeps (events accepted, emails sent, delivery reports, dead
 * letters …) by the minute and the hour, at a cost in rows written that
 * follows the counters that moved, not the emails; the overview draws an SVG
 * per series with a table of the same numbers, and rates each kind against
 * the published limits; retention prunes old buckets.
 */
import { createExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { activityOf, seriesValues, totalsByKind, zeroes } from '../src/console/charts/activity-data.ts'
import { ratesOf, standingOf } from '../src/console/rates/rates.ts'
import worker from '../src/index.ts'
import { bucketStatements, hourStart, minuteStart } from '../src/metrics/buckets.ts'
import { SERIES, type SeriesKey, seriesOf } from '../src/metrics/series.ts'
import { cloudflareEvent, eventIdOf, hardBounce, responseTo } from './email-events.ts'
import {
  ADMIN_TOKEN,
  consolePage,
  deliverBatch,
  eventually,
  guid,
  notificationsOf,
  pendingNotification,
  runCron,
  storeDeadLetters,
} from './helpers.ts'

const MINUTE_MS = 60_000
const HOUR_MS = 3_600_000

type Bucket = { width: string; start: string; name: string; labels: string; value: number }

/** Each series' sum over the buckets of `width` starting at `start`. */
async function bucketed(width: 'minute' | 'hour', start: string): Promise<Record<SeriesKey, number>> {
  const { results } = await env.DB.prepare('SELECT * FROM counter_buckets WHERE width = ?1 AND start = ?2')
    .bind(width, start)
    .all<Bucket>()
  const sums = zeroes()
  for (const row of results) {
    const series = seriesOf(row.name, JSON.parse(row.labels))
    if (series) sums[series] += row.value
  }
  return sums
}

/** Materializes an event (one notify-events delivery), then waits for its notification to end in `status`. */
async function notify(event: ReturnType<typeof responseTo>, status = 'sent') {
  await deliverBatch([{ id: `m-${guid()}`, attempts: 1, body: event }])
  return eventually(async () => {
    const [row] = await notificationsOf(eventIdOf(event))
    expect(row?.status).toBe(status)
    return row as NonNullable<typeof row>
  })
}

/** A Cloudflare Email Sending report about a sent notification, delivered to notify-email-events. */
async function report(kind: 'delivered' | 'bounced' | 'complained', notificationId: string, recipient: string) {
  const row = await env.DB.prepare('SELECT provider_id FROM notifications WHERE id = ?1')
    .bind(notificationId)
    .first<{ provider_id: string }>()
  const payload = kind === 'bounced' ? hardBounce : kind === 'complained' ? { complaint: { type: 'abuse' } } : {}
  const body = cloudflareEvent(kind, String(row?.provider_id), recipient, payload)
  await deliverBatch([{ id: `e-${guid()}`, attempts: 1, body }], 'notify-email-events')
}

/** Text without its tags, entities decoded, spaces collapsed. */
function textOf(html: string): string {
  return html
    .replace(/<[^>]*>/g, ' ')
    .replaceAll('&#39;', "'")
    .replaceAll('&quot;', '"')
    .replaceAll('&amp;', '&')
    .replace(/\s+/g, ' ')
    .trim()
}

/** The part of the page from the element whose attribute names `marker` to the end of its section. */
function sectionOf(html: string, marker: string): string {
  const start = html.indexOf(marker)
  expect(start).toBeGreaterThanOrEqual(0)
  return html.slice(start, html.indexOf('</section>', html.indexOf('</details>', start)))
}

/** The cells of the table row whose first cell holds `first`, as text. */
function rowOf(html: string, first: RegExp): string[] | undefined {
  for (const row of html.match(/<tr[^>]*>.*?<\/tr>/gs) ?? []) {
    const cells = (row.match(/<t[hd][^>]*>.*?<\/t[hd]>/gs) ?? []).map(textOf)
    if (cells[0] && first.test(cells[0])) return cells
  }
  return undefined
}

/** Inserts a bucket row as the cron would have written it. */
async function insertBucket(width: 'minute' | 'hour', start: string, name: string, labels: object, value: number) {
  const sorted = JSON.stringify(Object.fromEntries(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b))))
  await env.DB.prepare('INSERT INTO counter_buckets (width, start, name, labels, value) VALUES (?1, ?2, ?3, ?4, ?5)')
    .bind(width, start, name, sorted, value)
    .run()
}

describe('the time buckets', () => {
  it("move with the pipeline: the cron puts each counter's gain of the minute in its bucket, and the hour's sum in the hour's", async () => {
    // Whatever earlier work left unbucketed goes into a minute of its own first.
    const before = new Date()
    await runCron(before)

    const delivered = `charts-delivered-${guid().slice(0, 8)}@example.com`
    const bounced = `charts-bounced-${guid().slice(0, 8)}@example.com`
    const complained = `charts-complained-${guid().slice(0, 8)}@example.com`
    const bouncedUser = guid()
    const first = await notify(responseTo(delivered))
    const second = await notify(responseTo(bounced, bouncedUser))
    const third = await notify(responseTo(complained))
    await report('delivered', first.id, delivered)
    await report('bounced', second.id, bounced)
    await report('delivered', third.id, complained)
    await report('complained', third.id, complained)
    // The bounce suppressed the address: the next event to it is accepted and ends suppressed.
    await notify(responseTo(bounced, bouncedUser), 'suppressed')
    await storeDeadLetters(1, 'NTF_TEMPLATE_NOT_RESOLVED')

    // The next minute's run: the gains since `before` are dated to the minute that just ended.
    const at = new Date(before.getTime() + MINUTE_MS)
    await runCron(at)
    const minute = minuteStart(at.getTime() - MINUTE_MS)
    expect(await bucketed('minute', minute)).toEqual({
      accepted: 4,
      sent: 3,
      failed: 0,
      suppressed: 1,
      'opted-out': 0,
      'dead-lettered': 1,
      delivered: 2,
      bounced: 1,
      complained: 1,
    })
    // Delivery reports are counted by the kind of the notification they are about.
    const { results: kinds } = await env.DB.prepare(
      `SELECT DISTINCT json_extract(labels, '$.kind') AS kind FROM counter_buckets
       WHERE width = 'minute' AND start = ?1 AND name = 'notify_deliveries_total'`,
    )
      .bind(minute)
      .all<{ kind: string }>()
    expect(kinds.map((row) => row.kind)).toEqual([first.kind])
    // Both counters are on /metrics: the reports by kind, the dead letters each time one died.
    const metrics = await (
      await worker.fetch(
        new Request('http://worker/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
        env,
        createExecutionContext(),
      )
    ).text()
    expect(metrics).toMatch(
      new RegExp(
        `^notify_deliveries_total\\{transport="cloudflare",status="complained",kind="${first.kind}"\\} [1-9]`,
        'm',
      ),
    )
    expect(metrics).toMatch(/^# TYPE notify_dead_letters_total counter$/m)
    expect(metrics).toMatch(
      /^notify_dead_letters_total\{queue="notify-events",code="NTF_TEMPLATE_NOT_RESOLVED"\} [1-9]/m,
    )

    // Nothing more moved: a run a minute later buckets nothing.
    const quiet = new Date(at.getTime() + MINUTE_MS)
    const [gains] = await env.DB.batch(bucketStatements(env.DB, quiet))
    expect(gains?.meta.changes).toBe(0)

    // The first run of the next hour sums the hour: each counter's minute buckets of that hour.
    const nextHour = new Date(Date.parse(hourStart(at.getTime() - MINUTE_MS)) + HOUR_MS + 5_000)
    await runCron(nextHour)
    const hour = hourStart(at.getTime() - MINUTE_MS)
    const { results: mismatched } = await env.DB.prepare(
      `SELECT h.name, h.labels, h.value, (SELECT sum(value) FROM counter_buckets m WHERE m.width = 'minute'
         AND m.name = h.name AND m.labels = h.labels AND m.start >= ?1 AND m.start < ?2) AS minutes
       FROM counter_buckets h WHERE h.width = 'hour' AND h.start = ?1`,
    )
      .bind(hour, new Date(Date.parse(hour) + HOUR_MS).toISOString())
      .all<{ value: number; minutes: number }>()
    expect(mismatched.length).toBeGreaterThan(0)
    expect(mismatched.filter((row) => row.value !== row.minutes)).toEqual([])
    const summed = await bucketed('hour', hour)
    for (const [series, value] of Object.entries(await bucketed('minute', minute))) {
      expect(summed[series as SeriesKey]).toBeGreaterThanOrEqual(value)
    }
  })

  it('cost rows written by the counters that moved, not by the emails: one bucket row and one mark each', async () => {
    const base = Date.parse('2031-03-04T05:06:30Z')
    await env.DB.batch(bucketStatements(env.DB, new Date(base)))
    const kind = `CostKind${guid().slice(0, 6)}`
    const labels = JSON.stringify({ channel: 'email', kind, status: 'sent' })
    const bump = (value: number) =>
      env.DB.prepare(
        `INSERT INTO counters (name, labels, value) VALUES ('notify_notifications_total', ?1, ?2)
         ON CONFLICT (name, labels) DO UPDATE SET value = value + excluded.value`,
      )
        .bind(labels, value)
        .run()
    const written = async (at: number) => {
      const results = await env.DB.batch(bucketStatements(env.DB, new Date(at)))
      return results.slice(0, 2).map((result) => result.meta.rows_written)
    }
    await bump(1)
    const one = await written(base + MINUTE_MS)
    await bump(500)
    const many = await written(base + 2 * MINUTE_MS)
    expect(one).toEqual([1, 1])
    expect(many).toEqual(one)
    const row = await env.DB.prepare(
      "SELECT value FROM counter_buckets WHERE width = 'minute' AND start = ?1 AND labels = ?2",
    )
      .bind(minuteStart(base + MINUTE_MS), labels)
      .first<{ value: number }>()
    expect(row?.value).toBe(500)
  })

  it("also bucket the final statuses no chart shows (digested, throttled …), for the last day's card", async () => {
    const base = Date.parse('2031-04-05T06:07:30Z')
    await env.DB.batch(bucketStatements(env.DB, new Date(base)))
    const kind = `TallyKind${guid().slice(0, 6)}`
    const bump = (status: string, value: number) =>
      env.DB.prepare(
        `INSERT INTO counters (name, labels, value) VALUES ('notify_notifications_total', ?1, ?2)
         ON CONFLICT (name, labels) DO UPDATE SET value = value + excluded.value`,
      )
        .bind(JSON.stringify({ channel: 'email', kind, status }), value)
        .run()
    await bump('throttled', 3)
    await bump('digested', 4)
    // A status a notification waits in is no outcome: not bucketed.
    await bump('pending', 5)
    await env.DB.batch(bucketStatements(env.DB, new Date(base + MINUTE_MS)))
    const { results } = await env.DB.prepare(
      `SELECT json_extract(labels, '$.status') AS status, value FROM counter_buckets
       WHERE width = 'minute' AND json_extract(labels, '$.kind') = ?1 ORDER BY status`,
    )
      .bind(kind)
      .all<{ status: string; value: number }>()
    expect(results).toEqual([
      { status: 'digested', value: 4 },
      { status: 'throttled', value: 3 },
    ])
  })

  it('are pruned by retention: minute buckets after 3 hours, hour buckets after 8 days', async () => {
    const now = Date.now()
    const labels = { channel: 'email', kind: `Prune${guid().slice(0, 6)}`, status: 'sent' }
    const name = 'notify_notifications_total'
    await insertBucket('minute', minuteStart(now - 4 * HOUR_MS), name, labels, 1)
    await insertBucket('minute', minuteStart(now - 2 * HOUR_MS), name, labels, 2)
    await insertBucket('hour', hourStart(now - 9 * 24 * HOUR_MS), name, labels, 3)
    await insertBucket('hour', hourStart(now - 7 * 24 * HOUR_MS), name, labels, 4)
    await runCron(new Date(now))
    const { results } = await env.DB.prepare(
      `SELECT width, value FROM counter_buckets WHERE json_extract(labels, '$.kind') = ?1 ORDER BY value`,
    )
      .bind(labels.kind)
      .all<{ width: string; value: number }>()
    expect(results).toEqual([
      { width: 'minute', value: 2 },
      { width: 'hour', value: 4 },
    ])
  })
})

describe('the overview', () => {
  it('draws an SVG per series for the last hour and the last 7 days, with a table of the same numbers', async () => {
    const now = Date.now()
    // A minute and an hour nothing else in this file writes to.
    const minute = minuteStart(now - 37 * MINUTE_MS)
    const hour = hourStart(now - 50 * HOUR_MS)
    const kind = `ChartKind${guid().slice(0, 6)}`
    await insertBucket('minute', minute, 'notify_notifications_total', { channel: 'email', kind, status: 'sent' }, 7)
    await insertBucket('minute', minute, 'notify_deliveries_total', { kind, status: 'bounced', transport: 'x' }, 2)
    await insertBucket('minute', minute, 'notify_events_total', { outcome: 'enqueued', source: 'charts' }, 9)
    // A duplicate is not an accepted event.
    await insertBucket('minute', minute, 'notify_events_total', { outcome: 'skipped-duplicate', source: 'charts' }, 5)
    await insertBucket('hour', hour, 'notify_dead_letters_total', { code: 'NTF_X', queue: 'charts' }, 3)
    await insertBucket('hour', hour, 'notify_notifications_total', { channel: 'email', kind, status: 'opted-out' }, 4)

    const html = await consolePage()
    for (const [section, per] of [
      ['last-hour', 'minute'],
      ['last-week', 'hour'],
    ] as const) {
      const part = sectionOf(html, `aria-labelledby="${section}"`)
      const svgs = part.match(/<svg viewBox="0 0 300 112"[^>]*>/g) ?? []
      // One chart per series, named and described for a screen reader.
      expect(svgs.map((svg) => /data-series="([^"]+)"/.exec(svg)?.[1])).toEqual(
        SERIES.map((series) => `${section}-${series.key}`),
      )
      for (const svg of svgs) expect(svg).toMatch(/role="img" aria-labelledby="[^"]+-title [^"]+-desc"/)
      expect(part).toContain(`<title id="${section}-sent-title">Sent, emails per ${per}</title>`)
      // The table behind the charts: its totals are the charts' totals.
      const totals = rowOf(part, /^Total$/)
      expect(totals?.slice(1)).toEqual(svgs.map((svg) => /data-total="(\d+)"/.exec(svg)?.[1]))
      expect(part).toMatch(/<details><summary>The numbers, per (minute|hour)<\/summary><table/)
    }

    const lastHour = sectionOf(html, 'aria-labelledby="last-hour"')
    const row = rowOf(lastHour, new RegExp(`^${minute.slice(11, 16)}$`))
    const column = (key: SeriesKey) => 1 + SERIES.findIndex((series) => series.key === key)
    expect(row?.[column('sent')]).toBe('7')
    expect(row?.[column('bounced')]).toBe('2')
    expect(row?.[column('accepted')]).toBe('9')
    const lastWeek = sectionOf(html, 'aria-labelledby="last-week"')
    const hourRow = rowOf(lastWeek, new RegExp(`^${hour.slice(5, 10)} ${hour.slice(11, 16)}$`))
    expect(hourRow?.[column('dead-lettered')]).toBe('3')
    expect(hourRow?.[column('opted-out')]).toBe('4')
  })

  it('reads an hour from its hour bucket once the cron summed it, else from its minutes; now adds the live gain', () => {
    const now = new Date('2031-05-06T10:20:30Z')
    const sent = (kind: string) => ({
      name: 'notify_notifications_total',
      labels: JSON.stringify({ channel: 'email', kind, status: 'sent' }),
    })
    const activity = activityOf(
      {
        minutes: [
          { start: '2031-05-06T09:59:00.000Z', ...sent('A'), value: 2 },
          { start: '2031-05-06T09:30:00.000Z', ...sent('B'), value: 5 },
          { start: '2031-05-06T10:05:00.000Z', ...sent('A'), value: 3 },
        ],
        // The cron summed 09:00 for A only so far (B's minute came after it, say): each counter on its own.
        hours: [{ start: '2031-05-06T09:00:00.000Z', ...sent('A'), value: 40 }],
        live: [{ ...sent('A'), value: 1 }],
      },
      now,
    )
    const minutes = seriesValues(activity.minutes).sent
    expect(activity.minutes.starts.at(-1)).toBe('2031-05-06T10:20:00.000Z')
    expect(minutes.at(-1)).toBe(1)
    expect(minutes[activity.minutes.starts.indexOf('2031-05-06T10:05:00.000Z')]).toBe(3)
    expect(minutes.reduce((sum, value) => sum + value, 0)).toBe(1 + 3 + 2 + 5)
    const hours = seriesValues(activity.hours).sent
    expect(activity.hours.starts).toHaveLength(168)
    expect(hours.at(-1)).toBe(3 + 1)
    expect(hours.at(-2)).toBe(40 + 5)
    const day = totalsByKind(activity.hours, 24)
    expect(day.get('A')?.sent).toBe(44)
    expect(day.get('B')?.sent).toBe(5)
    expect(day.get('')?.sent).toBe(49)
  })

  it('sums the final statuses of the last 24 hours, the current hour and its live gain included', () => {
    const now = new Date('2031-05-06T10:20:30Z')
    const of = (status: string, kind = 'A') => ({
      name: 'notify_notifications_total',
      labels: JSON.stringify({ channel: 'email', kind, status }),
    })
    const activity = activityOf(
      {
        minutes: [{ start: '2031-05-06T10:05:00.000Z', ...of('digested'), value: 3 }],
        hours: [
          { start: '2031-05-05T11:00:00.000Z', ...of('throttled'), value: 2 },
          { start: '2031-05-05T11:00:00.000Z', ...of('throttled', 'B'), value: 1 },
          // 24 hours and more ago: yesterday's.
          { start: '2031-05-05T10:00:00.000Z', ...of('throttled'), value: 50 },
          { start: '2031-05-06T09:00:00.000Z', ...of('sent'), value: 9 },
        ],
        live: [
          { ...of('digested'), value: 1 },
          // Not a final status: not an outcome, though a counter of the same name.
          { ...of('pending'), value: 8 },
        ],
      },
      now,
    )
    expect(Object.fromEntries(activity.day)).toEqual({ digested: 4, throttled: 3, sent: 9 })
  })

  it('shows what waits now and what the last day ended as, each linked to its notifications', async () => {
    const endedOf = (html: string) =>
      Number(rowOf(sectionOf(html, 'aria-labelledby="last-day"'), /^undeliverable$/)?.[1] ?? 0)
    const before = endedOf(await consolePage())
    const kind = `EndedKind${guid().slice(0, 6)}`
    await insertBucket(
      'hour',
      hourStart(Date.now() - 3 * HOUR_MS),
      'notify_notifications_total',
      { channel: 'email', kind, status: 'undeliverable' },
      7,
    )
    // 25 hours ago: not in the last day.
    await insertBucket(
      'hour',
      hourStart(Date.now() - 25 * HOUR_MS),
      'notify_notifications_total',
      { channel: 'email', kind, status: 'undeliverable' },
      100,
    )
    const id = await pendingNotification(`waiting-${guid().slice(0, 8)}@example.com`)
    await env.DB.prepare("UPDATE notifications SET status = 'awaiting-contact' WHERE id = ?1").bind(id).run()
    const html = await consolePage()
    expect(endedOf(html)).toBe(before + 7)
    expect(sectionOf(html, 'aria-labelledby="last-day"')).toContain(
      'href="/console/notifications?status=undeliverable"',
    )
    const waiting = sectionOf(html, 'aria-labelledby="waiting"')
    expect(Number(rowOf(waiting, /^awaiting-contact$/)?.[1])).toBeGreaterThanOrEqual(1)
    expect(waiting).toContain('href="/console/notifications?status=awaiting-contact"')
    // A status nothing waits in is left out.
    expect(rowOf(waiting, /^closing$/)).toBeUndefined()
  })

  it('rates delivery, bounces and complaints per kind over 24 h and 7 d, marked near or over the published limits', async () => {
    const hour = hourStart(Date.now() - 2 * HOUR_MS)
    const tag = guid().slice(0, 6)
    const kinds = {
      fine: `RateFine${tag}`,
      near: `RateNear${tag}`,
      over: `RateOver${tag}`,
      worst: `RateWorst${tag}`,
    }
    const put = async (kind: string, sent: number, delivered: number, bounced: number, complained: number) => {
      await insertBucket('hour', hour, 'notify_notifications_total', { channel: 'email', kind, status: 'sent' }, sent)
      const report = (status: string, value: number) =>
        insertBucket('hour', hour, 'notify_deliveries_total', { kind, status, transport: 'cloudflare' }, value)
      await report('delivered', delivered)
      await report('bounced', bounced)
      if (complained > 0) await report('complained', complained)
    }
    await put(kinds.fine, 10_000, 9_900, 50, 2)
    await put(kinds.near, 1_000, 970, 25, 0)
    await put(kinds.over, 1_000, 960, 45, 2)
    await put(kinds.worst, 1_000, 1_000, 0, 4)

    const html = await consolePage()
    for (const label of ['Rates by kind, last 24 hours', 'Rates by kind, last 7 days']) {
      const table = html.slice(html.indexOf(`aria-label="${label}"`))
      const cells = (kind: string) => rowOf(table, new RegExp(`^${kind}$`))?.slice(1)
      expect(cells(kinds.fine)).toEqual(['10000', '9900', '99.00 %', '50', '0.50 %', '2', '0.02 %'])
      expect(cells(kinds.near)).toEqual(['1000', '970', '97.00 %', '25', "2.50 % near Resend's 4.00 %", '0', '0.00 %'])
      expect(cells(kinds.over)).toEqual([
        '1000',
        '960',
        '96.00 %',
        '45',
        "4.50 % over Resend's 4.00 %",
        '2',
        "0.21 % over Google's 0.10 %",
      ])
      expect(cells(kinds.worst)?.at(-1)).toBe("0.40 % over Yahoo's 0.30 %")
    }
    expect(html).toMatch(/<span class="level over">4\.50 % <strong>over<\/strong>/)
    expect(html).toMatch(/<span class="level near">2\.50 % <strong>near<\/strong>/)
    // The limits, quoted and linked.
    for (const url of [
      'https://support.google.com/a/answer/81126',
      'https://senders.yahooinc.com/best-practices/',
      'https://resend.com/legal/acceptable-use',
    ]) {
      expect(html).toContain(`href="${url}"`)
    }
    expect(textOf(html)).toContain(
      'Keep spam rates reported in Postmaster Tools below 0.10% and avoid ever reaching a spam rate of 0.30% or higher.',
    )
  })

  it('computes the rates from totals, and judges them against the lowest and highest limits', () => {
    const totals = (sent: number, delivered: number, bounced: number, complained: number) => ({
      ...zeroes(),
      sent,
      delivered,
      bounced,
      complained,
    })
    const [delivery, bounce, complaint] = ratesOf(totals(200, 190, 10, 1))
    expect(delivery).toMatchObject({ count: 190, of: 200, value: 0.95 })
    expect(bounce).toMatchObject({ count: 10, of: 200, value: 0.05 })
    expect(complaint).toMatchObject({ count: 1, of: 190 })
    expect(standingOf(bounce as NonNullable<typeof bounce>).level).toBe('over')
    expect(standingOf(delivery as NonNullable<typeof delivery>).level).toBe('ok')
    // Under half Resend's 0.08 %: fine; from 0.04 %: near; from 0.08 %: over, and past Google's 0.10 % too.
    const complaintOf = (complained: number) => standingOf(ratesOf(totals(0, 10_000, 0, complained))[2] as never)
    expect(complaintOf(3).level).toBe('ok')
    expect(complaintOf(4).level).toBe('near')
    expect(complaintOf(8).past.map((limit) => limit.source)).toEqual(['resend'])
    expect(complaintOf(10).past.map((limit) => limit.source)).toEqual(['resend', 'google'])
    expect(ratesOf(totals(0, 0, 0, 0)).map((rate) => rate.missing)).toEqual([
      'none sent',
      'none sent',
      'none delivered',
    ])
    // Sent, and no report about any of it yet: not a 0 % delivery rate.
    expect(ratesOf(totals(5, 0, 0, 0)).map((rate) => rate.missing)).toEqual([
      'no reports',
      'no reports',
      'none delivered',
    ])
  })
})
