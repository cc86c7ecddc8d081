import { createExecutionContext, createMessageBatch } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import worker from '../src/index.ts'
import {
  adminCall,
  deliver,
  eventually,
  freshInbound,
  guid,
  notificationsOf,
  sentMessagesOf,
  storeDeadLetters,
} from './helpers.ts'

const admin = adminCall

type Page = { items: { id: string; eventId: string | null; status: string; code: string }[]; nextCursor: string | null }

/** Dead letters straight through the notify-dlq consumer, as Cloudflare would deliver them. */

describe('dead letters: list and pages', () => {
  it('250 dead letters paged 7 at a time: no duplicate, no gap, stable while new ones arrive', async () => {
    const code = `NTF_TEST_${guid().slice(0, 6).toUpperCase()}`
    await storeDeadLetters(250, code)
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const query: string = `/v1/dead-letters?code=${code}&limit=7${cursor ? `&cursor=${cursor}` : ''}`
      const { status, body }: { status: number; body: Page } = await admin<Page>('GET', query)
      expect(status).toBe(200)
      seen.push(...body.items.map((item) => item.id))
      cursor = body.nextCursor
      pages += 1
      // New dead letters arrive while the operator pages.
      if (pages === 5 || pages === 20) await storeDeadLetters(3, code)
    } while (cursor)
    expect(new Set(seen).size).toBe(seen.length)
    const { results } = await env.DB.prepare('SELECT id FROM dead_letters WHERE code = ?1 ORDER BY first_seen, id')
      .bind(code)
      .all<{ id: string }>()
    expect(results).toHaveLength(256)
    // Everything that existed when paging began is there, in order; new ones only after it.
    const all = results.map((row) => row.id)
    expect(seen).toEqual(all.slice(0, seen.length))
    expect(seen.length).toBeGreaterThanOrEqual(250)
    expect(pages).toBeGreaterThanOrEqual(36)
  })

  it('filters by status, code, queue, source, kind and time, and shows one whole', async () => {
    const code = `NTF_TEST_${guid().slice(0, 6).toUpperCase()}`
    const before = new Date().toISOString()
    await storeDeadLetters(3, code)
    const { body } = await admin<Page>(
      'GET',
      `/v1/dead-letters?code=${code}&status=open&queue=notify-events&source=http&kind=ResponseCreated&since=${before}`,
    )
    expect(body.items).toHaveLength(3)
    const none = await admin<Page>('GET', `/v1/dead-letters?code=${code}&until=${before}`)
    expect(none.body.items).toEqual([])
    const one = await admin<{
      body: { source: string }
      headers: Record<string, string>
      history: unknown[]
      attempts: number
    }>('GET', `/v1/dead-letters/${body.items[0]?.id}`)
    expect(one.status).toBe(200)
    expect(one.body).toMatchObject({ attempts: 3, body: { source: 'http' }, headers: {} })
    expect(one.body.history).toHaveLength(1)
  })

  it('discard needs a reason, and records it', async () => {
    const code = `NTF_TEST_${guid().slice(0, 6).toUpperCase()}`
    await storeDeadLetters(1, code)
    const { body } = await admin<Page>('GET', `/v1/dead-letters?code=${code}`)
    const id = body.items[0]?.id as string
    expect((await admin('POST', `/v1/dead-letters/${id}/discard`, {})).status).toBe(400)
    const discarded = await admin('POST', `/v1/dead-letters/${id}/discard`, { reason: 'test data, not a real event' })
    expect(discarded).toMatchObject({ status: 200, body: { status: 'discarded' } })
    const shown = await admin('GET', `/v1/dead-letters/${id}`)
    expect(shown.body).toMatchObject({ discardReason: 'test data, not a real event' })
  })
})

describe('replay', () => {
  it('missing template → dead letter; template added → replay → email, dead letter replayed; replay again → duplicate, no second email', async () => {
    const owner = guid()
    const locale = 'kk'
    await admin('PUT', `/v1/contacts/${owner}`, {
      email: `owner-${owner.slice(0, 8)}@example.com`,
      locale,
      timeZone: 'Asia/Almaty',
    })
    const event = freshInbound('verification-completed', (value) =>
      Object.assign(value, { UserId: owner, Decision: 'approved' }),
    )
    const eventId = event.headers['message-id'] as string
    const batch = createMessageBatch('notify-events', [{ id: 'r1', timestamp: new Date(), attempts: 1, body: event }])
    createExecutionContext()
    await worker.queue(batch, { ...env, DEFAULT_LOCALE: 'kk' } as Env)
    const story = await eventually(async () => {
      const { status, body } = await admin<{ deadLetters: { id: string; code: string; status: string }[] }>(
        'GET',
        `/v1/events/${eventId}`,
      )
      expect(status).toBe(200)
      expect(body.deadLetters).toMatchObject([{ code: 'NTF_TEMPLATE_NOT_RESOLVED', status: 'open' }])
      return body
    })
    const id = story.deadLetters[0]?.id as string

    const saved = await admin<{ version: number; preview: { subject: string } }>(
      'PUT',
      `/v1/templates/VerificationApproved/${locale}/email`,
      {
        subject: 'Верификация өтті',
        textBody: 'Сәлем, {{ recipientName }}!',
        htmlBody: '<p>Сәлем, {{ recipientName }}!</p>',
      },
    )
    expect(saved).toMatchObject({ status: 200, body: { version: 1, preview: { subject: 'Верификация өтті' } } })

    const replayed = await admin('POST', `/v1/dead-letters/${id}/replay`)
    expect(replayed).toMatchObject({ status: 200, body: { replayed: [id], skipped: [] } })
    await eventually(async () => expect((await notificationsOf(eventId))[0]?.status).toBe('sent'))
    expect((await admin('GET', `/v1/dead-letters/${id}`)).body).toMatchObject({ status: 'replayed', replays: 1 })

    const again = await admin('POST', `/v1/dead-letters/${id}/replay`)
    expect(again.status).toBe(200)
    await eventually(async () => {
      const row = await env.DB.prepare('SELECT replays FROM dead_letters WHERE id = ?1').bind(id).first()
      expect(row).toEqual({ replays: 2 })
      const outcome = await env.DB.prepare(
        "SELECT value FROM counters WHERE name = 'notify_events_total' AND labels = ?1",
      )
        .bind(JSON.stringify({ outcome: 'skipped-duplicate', source: 'http' }))
        .first<{ value: number }>()
      expect(outcome?.value ?? 0).toBeGreaterThanOrEqual(1)
    })
    expect(await notificationsOf(eventId)).toHaveLength(1)
    expect(await sentMessagesOf(eventId)).toHaveLength(1)

    const trace = await admin<{
      processed: { outcome: string }[]
      notifications: { status: string; sentAt: string }[]
    }>('GET', `/v1/events/${eventId}`)
    expect(trace.body.processed).toMatchObject([{ outcome: 'enqueued' }])
    expect(trace.body.notifications).toMatchObject([{ status: 'sent', sentAt: expect.any(String) }])
  })

  it('bulk replay: dryRun changes nothing and reports what it would replay; then it replays', async () => {
    const code = `NTF_TEST_${guid().slice(0, 6).toUpperCase()}`
    await storeDeadLetters(4, code)
    const dry = await admin<{ dryRun: boolean; matched: { id: string }[]; replayed: string[] }>(
      'POST',
      '/v1/dead-letters/replay',
      {
        code,
        dryRun: true,
      },
    )
    expect(dry.body.dryRun).toBe(true)
    expect(dry.body.matched).toHaveLength(4)
    expect(dry.body.replayed).toEqual([])
    const untouched = await env.DB.prepare(
      "SELECT count(*) AS n FROM dead_letters WHERE code = ?1 AND status = 'open' AND replays = 0",
    )
      .bind(code)
      .first()
    expect(untouched).toEqual({ n: 4 })

    const capped = await admin<{ replayed: string[] }>('POST', '/v1/dead-letters/replay', { code, max: 3 })
    expect(capped.body.replayed).toHaveLength(3)
    const rest = await admin<{ replayed: string[] }>('POST', '/v1/dead-letters/replay', { code })
    expect(rest.body.replayed).toHaveLength(1)
    const replayed = await env.DB.prepare('SELECT count(*) AS n FROM dead_letters WHERE code = ?1 AND replays = 1')
      .bind(code)
      .first()
    expect(replayed).toEqual({ n: 4 })
  })

  it('bulk discard: every open one matching, with the reason; nothing open is left to match', async () => {
    const code = `NTF_TEST_${guid().slice(0, 6).toUpperCase()}`
    await storeDeadLetters(3, code)
    const done = await admin<{ matched: { id: string }[]; discarded: string[] }>('POST', '/v1/dead-letters/discard', {
      code,
      reason: 'test data',
    })
    expect(done.status).toBe(200)
    expect(done.body.discarded.sort()).toEqual(done.body.matched.map((row) => row.id).sort())
    expect(done.body.discarded).toHaveLength(3)
    const stored = await env.DB.prepare('SELECT status, discard_reason FROM dead_letters WHERE code = ?1')
      .bind(code)
      .all()
    expect(stored.results).toEqual(Array(3).fill({ status: 'discarded', discard_reason: 'test data' }))
    const again = await admin<{ discarded: string[] }>('POST', '/v1/dead-letters/discard', { code, reason: 'again' })
    expect(again.body.discarded).toEqual([])
  })
})

describe('templates, contacts, reviewers, notifications', () => {
  it('PUT rejects Liquid syntax errors and templates that fail on the example payload, naming the part', async () => {
    const broken = await admin<{ error: { code: string; issues: { field: string }[] } }>(
      'PUT',
      '/v1/templates/InvitationCreated/en/email',
      {
        subject: 'Hi',
        textBody: '{% if message %}no end',
        htmlBody: '<p>{{ message }}</p>',
      },
    )
    expect(broken.status).toBe(400)
    expect(broken.body.error.issues).toEqual([{ field: 'textBody', message: expect.stringContaining('not closed') }])
    const unknownFilter = await admin<{ error: { issues: { field: string; message: string }[] } }>(
      'PUT',
      '/v1/templates/InvitationCreated/en/email',
      { subject: 'Hi', textBody: '{{ message | shout }}', htmlBody: '<p></p>' },
    )
    expect(unknownFilter.status).toBe(400)
    const active = await admin<{ version: number }>('GET', '/v1/templates/InvitationCreated/en/email')
    expect(active.body.version).toBe(1)
  })

  it('preview renders the active template with the example payload, or given parts and model', async () => {
    const active = await admin<{ subject: string; text: string }>('POST', '/v1/templates/preview', {
      kind: 'ResponseCreated',
      locale: 'ru',
    })
    expect(active.body.subject).toBe('Новый отклик на ваш проект')
    expect(active.body.text).toContain('Редизайн лендинга для студии керамики')
    const given = await admin<{ html: string }>('POST', '/v1/templates/preview', {
      kind: 'ResponseCreated',
      subject: 's',
      textBody: 't',
      htmlBody: '<b>{{ x }}</b>',
      model: { x: '<i>' },
    })
    expect(given.body.html).toBe('<b>&lt;i&gt;</b>')
  })

  it('contacts: PUT honours the version guard, GET and DELETE', async () => {
    const userId = guid()
    expect((await admin('PUT', `/v1/contacts/${userId}`, { email: 'a@example.com', version: 5 })).status).toBe(200)
    expect((await admin('PUT', `/v1/contacts/${userId}`, { email: 'b@example.com', version: 4 })).status).toBe(409)
    // Without a version: an operator's correction, which keeps the producer's version.
    const corrected = await admin<{ version: number; operatorEditedAt: string | null }>(
      'PUT',
      `/v1/contacts/${userId}`,
      { email: 'c@example.com' },
    )
    expect(corrected.body).toMatchObject({ version: 5, email: 'c@example.com' })
    expect(corrected.body.operatorEditedAt).not.toBeNull()
    expect((await admin('PUT', `/v1/contacts/${userId}`, { email: 'not-an-email' })).status).toBe(400)
    expect((await admin('GET', `/v1/contacts/${userId}`)).body).toMatchObject({ email: 'c@example.com' })
    expect((await admin('DELETE', `/v1/contacts/${userId}`)).status).toBe(204)
    expect((await admin('GET', `/v1/contacts/${userId}`)).status).toBe(404)
  })

  it("an operator's correction never blocks the producer: its next version (one above the corrected one) applies", async () => {
    const userId = guid()
    const producer = (version: number, email: string) =>
      deliver(
        freshInbound('contact-upserted', (value) =>
          Object.assign(value, { UserId: userId, Email: email, Version: version }),
        ),
        1,
      )
    await producer(1, 'first@example.com')
    await eventually(async () =>
      expect((await admin('GET', `/v1/contacts/${userId}`)).body).toMatchObject({ version: 1 }),
    )
    expect((await admin('PUT', `/v1/contacts/${userId}`, { email: 'typo-fixed@example.com' })).status).toBe(200)
    // The producer's own redelivery of version 1 does not undo the correction…
    await producer(1, 'first@example.com')
    expect((await admin('GET', `/v1/contacts/${userId}`)).body).toMatchObject({ email: 'typo-fixed@example.com' })
    // …and its next real update, version 2, is applied (before: the correction had taken version 2).
    await producer(2, 'second@example.com')
    await eventually(async () =>
      expect((await admin('GET', `/v1/contacts/${userId}`)).body).toMatchObject({
        version: 2,
        email: 'second@example.com',
        operatorEditedAt: null,
      }),
    )
    // A contact an operator creates is below any producer version.
    const created = guid()
    expect((await admin('PUT', `/v1/contacts/${created}`, { email: 'made@example.com' })).body).toMatchObject({
      version: -1,
    })
  })

  it('reviewer pool: PUT, GET, DELETE', async () => {
    const reviewer = guid()
    expect((await admin('PUT', `/v1/reviewers/${reviewer}`)).status).toBe(200)
    expect(
      (await admin<{ items: { userId: string }[] }>('GET', '/v1/reviewers')).body.items.map((r) => r.userId),
    ).toContain(reviewer)
    expect((await admin('DELETE', `/v1/reviewers/${reviewer}`)).status).toBe(204)
    expect(
      (await admin<{ items: { userId: string }[] }>('GET', '/v1/reviewers')).body.items.map((r) => r.userId),
    ).not.toContain(reviewer)
  })

  it('GET /v1/notifications/:id shows the snapshot, the content and what was sent', async () => {
    const event = freshInbound('invitation.created')
    await deliver(event, 1)
    const eventId = JSON.parse(event.body).envelope.eventId
    const [row] = await eventually(async () => {
      const rows = await notificationsOf(eventId)
      expect(rows[0]?.status).toBe('sent')
      return rows
    })
    const { status, body } = await admin<{
      recipientEmail: string
      subject: string
      sentMessage: { raw?: string; transport: string }
    }>('GET', `/v1/notifications/${row?.id}?raw=true`)
    expect(status).toBe(200)
    expect(body).toMatchObject({ recipientEmail: 'mikhail.designer@example.com', subject: 'Вас пригласили в проект' })
    expect(body.sentMessage.transport).toBe('cloudflare')
    expect(body.sentMessage.raw).toContain('X-Notify-Edge-Notification')
  })
})

describe('/metrics', () => {
  it('parses as Prometheus exposition format and its numbers match the rows', async () => {
    const event = freshInbound('response.created')
    await deliver(event, 1)
    await eventually(async () =>
      expect((await notificationsOf(JSON.parse(event.body).envelope.eventId))[0]?.status).toBe('sent'),
    )
    const { status, body } = await admin<string>('GET', '/metrics')
    expect(status).toBe(200)
    const samples = new Map<string, number>()
    const types = new Map<string, string>()
    for (const line of body.split('\n')) {
      if (line === '') continue
      const type = /^# TYPE (\w+) (counter|gauge)$/.exec(line)
      if (type) {
        types.set(type[1] as string, type[2] as string)
        continue
      }
      if (line.startsWith('# HELP ')) continue
      const sample =
        /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|NaN|\+Inf|-Inf)$/.exec(
          line,
        )
      expect(sample, `not exposition format: ${line}`).not.toBeNull()
      samples.set(`${sample?.[1]}${sample?.[2] ?? ''}`, Number(sample?.[3]))
    }
    expect(types.get('notify_notifications_total')).toBe('counter')
    expect(types.get('notify_dead_letters_open')).toBe('gauge')
    expect(types.get('notify_consumer_lag_seconds')).toBe('gauge')
    expect(types.get('notify_events_total')).toBe('counter')
    expect(types.get('notifications_enqueued_total')).toBe('counter')
    expect(types.get('notifications_consumer_lag_seconds')).toBe('gauge')

    const open = await env.DB.prepare(
      "SELECT queue, code, count(*) AS n FROM dead_letters WHERE status = 'open' GROUP BY queue, code",
    ).all<{
      queue: string
      code: string
      n: number
    }>()
    for (const row of open.results) {
      expect(
        samples.get(`notify_dead_letters_open{queue="${row.queue}",code="${row.code}"}`),
        `${row.queue} ${row.code}`,
      ).toBe(row.n)
    }
    // Every notification of a kind without a digest is written pending or undeliverable, once; one
    // of a kind with a digest may be written digested and move to pending later (a digest of one).
    const created = await env.DB.prepare(
      "SELECT kind, channel, count(*) AS n FROM notifications WHERE kind <> 'ResponseCreated' GROUP BY kind, channel",
    ).all<{
      kind: string
      channel: string
      n: number
    }>()
    for (const row of created.results) {
      const labels = (status: string) => `{kind="${row.kind}",channel="${row.channel}",status="${status}"}`
      const total =
        (samples.get(`notify_notifications_total${labels('pending')}`) ?? 0) +
        (samples.get(`notify_notifications_total${labels('undeliverable')}`) ?? 0)
      expect(total, `${row.kind}`).toBe(row.n)
      expect(samples.get(`notifications_enqueued_total{kind="${row.kind}",channel="${row.channel}"}`)).toBe(
        samples.get(`notify_notifications_total${labels('pending')}`),
      )
    }
    // Each digest is written collecting, once.
    const digests = await env.DB.prepare(
      'SELECT kind, channel, count(*) AS n FROM notifications WHERE is_digest = 1 GROUP BY kind, channel',
    ).all<{ kind: string; channel: string; n: number }>()
    expect(digests.results.length).toBeGreaterThan(0)
    for (const row of digests.results) {
      expect(samples.get(`notify_digests_total{kind="${row.kind}",channel="${row.channel}",status="collecting"}`)).toBe(
        row.n,
      )
    }
    const sent = await env.DB.prepare(
      "SELECT kind, channel, count(*) AS n FROM notifications WHERE status = 'sent' GROUP BY kind, channel",
    ).all<{
      kind: string
      channel: string
      n: number
    }>()
    for (const row of sent.results) {
      expect(samples.get(`notify_notifications_total{kind="${row.kind}",channel="${row.channel}",status="sent"}`)).toBe(
        row.n,
      )
    }
    expect(samples.get('notify_consumer_lag_seconds{source="http"}')).toBeGreaterThan(0)
  })
})
