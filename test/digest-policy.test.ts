import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { configOf } from '../src/config.ts'
import type { KindDefinition, TemplateParts } from '../src/events/define.ts'
import { defineEventType } from '../src/events/define.ts'
import { deliveryModeOf, deliveryOf, kindOf, registerEventType } from '../src/events/registry.ts'
import { digestCloseAt } from '../src/materialize/digest-schedule.ts'
import { exampleModelOf } from '../src/templates/examples.ts'
import { render } from '../src/templates/sandbox.ts'
import { ADMIN_TOKEN } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

/**
 * A kind's delivery policy (issue 23, its first step): declared with the kind
 * in its event-type module, refused at registration when it cannot hold, and
 * the digest's templates rendered with a list of notifications.
 */

const PARTS: TemplateParts = { subject: 's', textBody: 't', htmlBody: '<p>h</p>' }

/** Registers a one-kind event type of a fresh type name; what it refuses is thrown. */
function register(kind: Partial<KindDefinition>): void {
  const name = `PolicyTest${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`
  registerEventType(
    defineEventType({
      family: 'arthunt',
      type: `policy-test.${name}`,
      summary: 'a test type',
      schema: z.object({}),
      example: { body: {} },
      channels: {},
      kinds: [{ name, summary: 'a test kind', category: 'optional', templates: { ru: PARTS }, ...kind }],
      intent: () => ({ type: 'ignored', reason: 'a test type' }),
    }),
  )
}

describe('a kind declares how it is delivered', () => {
  it('refuses what cannot hold, naming the channel and the rule', () => {
    const window = { window: { minutes: 10 } }
    expect(() =>
      register({ category: 'transactional', delivery: { email: { default: 'instant', digest: window } } }),
    ).toThrow(/transactional kind always goes at once: no digest or throttle on email/)
    expect(() =>
      register({
        category: 'transactional',
        delivery: { email: { default: 'instant', throttle: { max: 5, windowMinutes: 60 } } },
      }),
    ).toThrow(/transactional/)
    expect(() => register({ delivery: { email: { default: 'digest' } } })).toThrow(
      /email defaults to a digest but has no schedule/,
    )
    expect(() => register({ delivery: { email: { default: 'digest', digest: window } } })).toThrow(
      /email has a digest but the kind has no digestTemplates/,
    )
    for (const minutes of [0, 1441, 2.5]) {
      expect(() =>
        register({
          delivery: { email: { default: 'digest', digest: { window: { minutes } } } },
          digestTemplates: { ru: PARTS },
        }),
      ).toThrow(/a digest window is whole minutes from 1 to 1440/)
    }
    expect(() =>
      register({
        delivery: { email: { default: 'digest', digest: { daily: { at: '25:00' } } } },
        digestTemplates: { ru: PARTS },
      }),
    ).toThrow(/a daily digest's time is HH:MM/)
    expect(() =>
      register({ delivery: { email: { default: 'instant', throttle: { max: 0, windowMinutes: 60 } } } }),
    ).toThrow(/a throttle is at least 1 email per at least 1 minute/)
    expect(() => register({ name: 'Has.Dot' })).toThrow(/a kind name cannot contain "."/)
    // What holds is registered.
    expect(() =>
      register({
        delivery: {
          email: { default: 'digest', digest: { daily: { at: '09:00' } }, throttle: { max: 6, windowMinutes: 60 } },
        },
        digestTemplates: { ru: PARTS },
      }),
    ).not.toThrow()
  })

  it('ResponseCreated goes in a 10-minute digest on email by default, at most 5 an hour one by one; a kind without a policy is instant', () => {
    expect(deliveryOf('ResponseCreated', 'email')).toEqual({
      default: 'digest',
      digest: { window: { minutes: 10 } },
      throttle: { max: 5, windowMinutes: 60 },
    })
    expect(deliveryOf('VerificationApproved', 'email')).toEqual({ default: 'instant' })
    // The recipient's choice decides where the kind has a digest; nothing makes a kind without one digested.
    expect(deliveryModeOf('ResponseCreated', 'email', undefined)).toBe('digest')
    expect(deliveryModeOf('ResponseCreated', 'email', 'instant')).toBe('instant')
    expect(deliveryModeOf('InvitationCreated', 'email', 'digest')).toBe('instant')
  })
})

describe("ResponseCreated's digest templates", () => {
  const kind = kindOf('ResponseCreated') as KindDefinition
  const example = exampleModelOf('ResponseCreated') as Record<string, unknown>
  const limits = configOf(env).templateLimits

  /** `count` responses, the first `listed` of them as items, to `projects` distinct projects. */
  function digest(locale: 'ru' | 'en', count: number, listed = count, projects = 1) {
    const items = Array.from({ length: listed }, (_, index) => ({
      ...example,
      actorName: `Специалист ${index + 1} <b>`,
      projectTitle: `Проект ${(index % projects) + 1}`,
      deepLink: `https://arthunt.ru/responses/${index + 1}`,
    }))
    const parts = kind.digestTemplates?.[locale] as TemplateParts
    return render(
      { kind: 'ResponseCreated.digest', locale, channel: 'email', version: 0, ...parts },
      { items, count, recipientName: example.recipientName },
      locale,
      limits,
      { cache: false },
    )
  }

  it('five responses to one project: one subject that counts them, every response listed with its link', () => {
    const rendered = digest('ru', 5)
    expect(rendered.subject).toBe('5 новых откликов на ваш проект «Проект 1»')
    for (let index = 1; index <= 5; index += 1) {
      expect(rendered.text).toContain(`Специалист ${index} <b> — «Проект 1»`)
      expect(rendered.text).toContain(`https://arthunt.ru/responses/${index}`)
      // Every value escaped in the HTML part, as in the kind's own template.
      expect(rendered.html).toContain(`Специалист ${index} &lt;b&gt;`)
    }
    expect(rendered.html).not.toContain('<b>')
    expect(digest('en', 5).subject).toBe('5 new responses to your project "Проект 1"')
  })

  it("counts in the locale's plural forms, names several projects together, and says how many are not listed", () => {
    expect(digest('ru', 1).subject).toBe('1 новый отклик на ваш проект «Проект 1»')
    expect(digest('ru', 2).subject).toBe('2 новых отклика на ваш проект «Проект 1»')
    expect(digest('ru', 21, 3).subject).toBe('21 новый отклик на ваш проект «Проект 1»')
    expect(digest('en', 1).subject).toBe('1 new response to your project "Проект 1"')
    expect(digest('ru', 4, 4, 2).subject).toBe('4 новых отклика на ваши проекты')
    expect(digest('en', 4, 4, 2).subject).toBe('4 new responses to your projects')
    expect(digest('ru', 60, 50).text).toContain('И ещё 10.')
    expect(digest('en', 60, 50).html).toContain('And 10 more.')
    expect(digest('ru', 5).text).not.toContain('И ещё')
  })

  it('a digest of DIGEST_MAX_ITEMS (50) renders within the default template limits', () => {
    const rendered = digest('ru', 50)
    expect(rendered.text.split('https://arthunt.ru/responses/').length - 1).toBe(50)
  })
})

describe('when a digest closes', () => {
  const opened = new Date('2026-12-02T05:00:00.400Z') // 08:00:00 in Moscow (UTC+3)

  it('a window closes its minutes after the digest opened; DIGEST_WINDOW_SECONDS replaces any schedule', () => {
    expect(digestCloseAt({ window: { minutes: 10 } }, opened, 'Europe/Moscow').toISOString()).toBe(
      '2026-12-02T05:10:00.000Z',
    )
    expect(digestCloseAt({ window: { minutes: 10 } }, opened, 'Europe/Moscow', 2).toISOString()).toBe(
      '2026-12-02T05:00:02.000Z',
    )
    expect(digestCloseAt({ daily: { at: '09:00' } }, opened, 'Europe/Moscow', 2).toISOString()).toBe(
      '2026-12-02T05:00:02.000Z',
    )
  })

  it("a daily digest closes at the next local time in the recipient's zone, strictly after it opened", () => {
    expect(digestCloseAt({ daily: { at: '09:00' } }, opened, 'Europe/Moscow').toISOString()).toBe(
      '2026-12-02T06:00:00.000Z',
    )
    expect(digestCloseAt({ daily: { at: '08:00' } }, opened, 'Europe/Moscow').toISOString()).toBe(
      '2026-12-03T05:00:00.000Z',
    )
    expect(digestCloseAt({ daily: { at: '07:30' } }, opened, 'Europe/Moscow').toISOString()).toBe(
      '2026-12-03T04:30:00.000Z',
    )
    expect(digestCloseAt({ daily: { at: '09:00' } }, opened, 'America/New_York').toISOString()).toBe(
      '2026-12-02T14:00:00.000Z',
    )
  })
})

describe("a digest's templates through the API", () => {
  const admin = (method: string, path: string, body?: unknown) =>
    fetchWorker(path, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })

  it('are kept under `{kind}.digest`: the built-in one is read, previewed with five sample items, and a new version is checked against them before it is saved', async () => {
    const builtIn = await admin('GET', '/v1/templates/ResponseCreated.digest/ru/email')
    expect(builtIn.status).toBe(200)
    expect(((await builtIn.json()) as { subject: string }).subject).toContain('plural')

    const preview = await admin('POST', '/v1/templates/preview', { kind: 'ResponseCreated.digest', locale: 'ru' })
    expect(preview.status).toBe(200)
    const rendered = (await preview.json()) as { subject: string; text: string }
    expect(rendered.subject).toMatch(/^5 новых откликов на ваш проект «.+»$/)
    expect(rendered.text.match(/https:\/\//g)?.length).toBe(5)

    // One that does not parse is refused, its part named, before anything is saved.
    const broken = await admin('PUT', '/v1/templates/ResponseCreated.digest/ru/email', {
      subject: '{% for item in items %}{{ item.actorName }}',
      textBody: 'x',
      htmlBody: '<p>x</p>',
    })
    expect(broken.status).toBe(400)
    expect(JSON.stringify(await broken.json())).toContain('"field":"subject"')
    const saved = await admin('PUT', '/v1/templates/ResponseCreated.digest/ru/email', {
      subject: '{{ count }} {{ count | plural: "отклик", "отклика", "откликов" }}',
      textBody: '{% for item in items %}{{ item.actorName }}\n{% endfor %}',
      htmlBody: '<p>{{ count }}</p>',
    })
    expect(saved.status).toBe(200)
    const body = (await saved.json()) as { version: number; preview: { subject: string } }
    expect(body.version).toBeGreaterThanOrEqual(1)
    expect(body.preview.subject).toBe('5 откликов')

    // The kinds' own names are still what they were; an unknown digest is not a template key.
    expect((await admin('GET', '/v1/templates/InvitationCreated.digest/ru/email')).status).toBe(400)
  })
})
