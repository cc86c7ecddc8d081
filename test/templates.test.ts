import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { configOf } from '../src/config.ts'
import { quietHoursEnd } from '../src/templates/quiet-hours.ts'
import { scheduleFor } from '../src/templates/render-notification.ts'
import { localeChain } from '../src/templates/resolve.ts'
import { render } from '../src/templates/sandbox.ts'
import { deliver, eventually, freshInbound, guid, notificationsOf, seedContact, watchQueue } from './helpers.ts'

const QUIET = { start: 22 * 60, end: 8 * 60 }

describe('quiet hours, in the recipient’s time zone', () => {
  it('the same instant is quiet in Vladivostok and not in Moscow', () => {
    const instant = new Date('2026-11-29T13:30:00Z') // 23:30 in Vladivostok (UTC+10), 16:30 in Moscow (UTC+3)
    expect(quietHoursEnd(instant, 'Asia/Vladivostok', QUIET.start, QUIET.end)?.toISOString()).toBe(
      '2026-11-29T22:00:00.000Z',
    )
    expect(quietHoursEnd(instant, 'Europe/Moscow', QUIET.start, QUIET.end)).toBeNull()
    const night = new Date('2026-11-29T20:15:00Z') // 23:15 in Moscow, 06:15 next day in Vladivostok
    expect(quietHoursEnd(night, 'Europe/Moscow', QUIET.start, QUIET.end)?.toISOString()).toBe(
      '2026-11-30T05:00:00.000Z',
    )
    expect(quietHoursEnd(night, 'Asia/Vladivostok', QUIET.start, QUIET.end)?.toISOString()).toBe(
      '2026-11-29T22:00:00.000Z',
    )
  })

  it('holds only the configured urgencies (Low by default); a fallback also waits out its grace period', () => {
    const instant = new Date('2026-11-29T13:30:00Z')
    const config = {
      FALLBACK_GRACE_SECONDS: 600,
      QUIET_HOURS_URGENCIES: ['low' as const],
      QUIET_HOURS_START: QUIET.start,
      QUIET_HOURS_END: QUIET.end,
    }
    expect(scheduleFor('normal', false, 'Asia/Vladivostok', config, instant)).toEqual(instant)
    expect(scheduleFor('high', false, 'Asia/Vladivostok', config, instant)).toEqual(instant)
    expect(scheduleFor('low', false, 'Asia/Vladivostok', config, instant).toISOString()).toBe(
      '2026-11-29T22:00:00.000Z',
    )
    expect(scheduleFor('low', true, 'Europe/Moscow', config, instant).toISOString()).toBe('2026-11-29T13:40:00.000Z')
  })

  it('a held notification is delayed, never dropped: Vladivostok waits, Moscow goes at once', async () => {
    // A window around "now" in Vladivostok, which at this instant is 7 hours away from Moscow's clock.
    const clock = (zone: string, shiftMinutes: number) =>
      new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(
        new Date(Date.now() + shiftMinutes * 60_000),
      )
    const quietEnv = {
      ...env,
      QUIET_HOURS_URGENCIES: 'low,normal',
      QUIET_HOURS_START: clock('Asia/Vladivostok', -60),
      QUIET_HOURS_END: clock('Asia/Vladivostok', 120),
    }
    const far = guid()
    const near = guid()
    await seedContact(far, { timeZone: 'Asia/Vladivostok' })
    await seedContact(near, { timeZone: 'Europe/Moscow' })
    const decision = (owner: string) =>
      freshInbound('verification-completed', (value) => Object.assign(value, { UserId: owner, Decision: 'approved' }))
    const { createExecutionContext, createMessageBatch } = await import('cloudflare:test')
    const { default: worker } = await import('../src/index.ts')
    const events = [decision(far), decision(near)]
    const batch = createMessageBatch(
      'notify-events',
      events.map((body, index) => ({ id: `q${index}`, timestamp: new Date(), attempts: 1, body })),
    )
    createExecutionContext()
    await worker.queue(batch, quietEnv as Env)
    const [held] = await notificationsOf(events[0]?.headers['message-id'] as string)
    expect(held?.status).toBe('pending')
    const wait = Date.parse(held?.scheduled_at as string) - Date.now()
    expect(wait).toBeGreaterThan(60 * 60_000)
    expect(wait).toBeLessThanOrEqual(121 * 60_000)
    await eventually(async () => {
      const [now] = await notificationsOf(events[1]?.headers['message-id'] as string)
      expect(now?.status).toBe('sent')
    })
    expect((await notificationsOf(events[0]?.headers['message-id'] as string))[0]?.status).toBe('pending')
  })
})

describe('templates', () => {
  it('falls back ru-RU → ru → DEFAULT_LOCALE', () => {
    expect(localeChain('ru-RU', 'ru')).toEqual(['ru-RU', 'ru'])
    expect(localeChain('en-US', 'ru')).toEqual(['en-US', 'en', 'ru'])
    expect(localeChain(null, 'ru-RU')).toEqual(['ru-RU', 'ru'])
  })

  it('picks the most specific active template for the recipient’s locale', async () => {
    const english = guid()
    const german = guid()
    await seedContact(english, { locale: 'en-GB' })
    await seedContact(german, { locale: 'de-DE' })
    const events = [english, german].map((owner) =>
      freshInbound('verification-completed', (value) => Object.assign(value, { UserId: owner, Decision: 'approved' })),
    )
    for (const event of events) await deliver(event, 1)
    const [en] = await notificationsOf(events[0]?.headers['message-id'] as string)
    const [de] = await notificationsOf(events[1]?.headers['message-id'] as string)
    expect(en).toMatchObject({ locale: 'en', subject: 'Your verification is approved' })
    expect(de).toMatchObject({ locale: 'ru', subject: 'Верификация пройдена' })
  })

  it('no template after the whole fallback chain → dead letter NTF_TEMPLATE_NOT_RESOLVED, nothing persisted', async () => {
    const owner = guid()
    await seedContact(owner, { locale: 'fr-FR' })
    const event = freshInbound('verification-completed', (value) =>
      Object.assign(value, { UserId: owner, Decision: 'approved' }),
    )
    const { createExecutionContext, createMessageBatch } = await import('cloudflare:test')
    const { default: worker } = await import('../src/index.ts')
    const batch = createMessageBatch('notify-events', [{ id: 'nt', timestamp: new Date(), attempts: 1, body: event }])
    const settled = watchQueue(batch)
    const ctx = createExecutionContext()
    await worker.queue(batch, { ...env, DEFAULT_LOCALE: 'de' } as Env)
    expect((await settled(ctx)).explicitAcks).toEqual(['nt'])
    const eventId = event.headers['message-id'] as string
    await eventually(async () => {
      const dead = await env.DB.prepare('SELECT code, error FROM dead_letters WHERE event_id = ?1')
        .bind(eventId)
        .first()
      expect(dead).toMatchObject({
        code: 'NTF_TEMPLATE_NOT_RESOLVED',
        error: expect.stringContaining('fr-FR → fr → de'),
      })
    })
    expect(await notificationsOf(eventId)).toEqual([])
    expect(await env.DB.prepare('SELECT 1 FROM processed_marks WHERE event_id = ?1').bind(eventId).first()).toBeNull()
  })

  it('formats money per locale and escapes values in HTML only', () => {
    const template = {
      kind: 'Test',
      locale: 'x',
      channel: 'email',
      version: 1,
      subject: '{{ title }}',
      textBody: '{{ price | money: "RUB" }} / {{ days | days }} / {{ title }}',
      htmlBody: '<p>{{ title }}</p>',
    }
    const limits = configOf(env).templateLimits
    const ru = render(template, { price: 45000, days: 14, title: 'A & <B>' }, 'ru-RU', limits)
    expect(ru.text).toBe('45\u00a0000\u00a0₽ / 14 дней / A & <B>')
    expect(ru.subject).toBe('A & <B>')
    expect(ru.html).toBe('<p>A &amp; &lt;B&gt;</p>')
    const en = render({ ...template, version: 2 }, { price: 45000, days: 1, title: 't' }, 'en', limits)
    expect(en.text).toBe('RUB\u00a045,000 / 1 day / t')
  })
})
