import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import type { TemplateLimits } from '../src/config.ts'
import { render, type TemplateSource } from '../src/templates/sandbox.ts'
import { ADMIN_TOKEN, deliverBatch, eventually, freshInbound, guid, seedContact } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

/** An operator request, with variables of the test's choosing laid over the env. */
async function operator(method: string, path: string, body: unknown, vars: Record<string, string> = {}) {
  const response = await fetchWorker(
    path,
    {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    },
    vars,
  )
  return {
    status: response.status,
    body: (await response.json()) as {
      error?: { code: string; message: string; issues: { field: string; message: string }[] }
    },
  }
}

const draft = (textBody: string, extra: Record<string, unknown> = {}) => ({
  kind: 'ResponseCreated',
  locale: 'ru',
  subject: 'Тема',
  textBody,
  htmlBody: '<p>ok</p>',
  ...extra,
})

describe('template limits', () => {
  it('a loop over thirty million is refused at once, naming the memory limit (preview and save)', async () => {
    const loop = '{% for i in (1..30000000) %}xxxxxxxxxx{% endfor %}'
    const preview = await operator('POST', '/v1/templates/preview', draft(loop))
    expect(preview.status).toBe(400)
    expect(preview.body.error?.code).toBe('INVALID_REQUEST')
    expect(preview.body.error?.issues).toEqual([
      { field: 'textBody', message: expect.stringContaining('TEMPLATE_MEMORY_LIMIT') },
    ])
    const before = await env.DB.prepare("SELECT count(*) AS n FROM templates WHERE kind = 'ResponseCreated'").first()
    const save = await operator('PUT', '/v1/templates/ResponseCreated/ru/email', {
      subject: 'Тема',
      textBody: loop,
      htmlBody: '<p>ok</p>',
    })
    expect(save.status).toBe(400)
    expect(save.body.error?.issues?.[0]?.message).toContain('TEMPLATE_MEMORY_LIMIT')
    expect(await env.DB.prepare("SELECT count(*) AS n FROM templates WHERE kind = 'ResponseCreated'").first()).toEqual(
      before,
    )
  })

  it('a loop that prints a little many times stops at the output limit, not after building it all', async () => {
    const result = await operator(
      'POST',
      '/v1/templates/preview',
      draft('{% for i in (1..90000) %}xxxxxxxxxx{% endfor %}'),
      // This test is about the output limit alone: the others are lifted out of its way.
      { TEMPLATE_RENDER_STEPS: '100000000', TEMPLATE_MEMORY_LIMIT: '100000000', TEMPLATE_RENDER_LIMIT_MS: '600000' },
    )
    expect(result.status).toBe(400)
    expect(result.body.error?.issues).toEqual([
      { field: 'textBody', message: expect.stringContaining('TEMPLATE_OUTPUT_LIMIT_BYTES') },
    ])
  })

  it('nested loops over the model are charged per iteration', async () => {
    const items = Array.from({ length: 2000 }, (_, index) => index)
    // The local clock moves: on a loaded machine the render limit could stop these loops first,
    // so it is lifted out of the way here, with the step limit — this test is about the memory limit alone.
    const result = await operator(
      'POST',
      '/v1/templates/preview',
      draft('{% for a in items %}{% for b in items %}{% endfor %}{% endfor %}', { model: { items } }),
      { TEMPLATE_RENDER_LIMIT_MS: '600000', TEMPLATE_RENDER_STEPS: '100000000' },
    )
    expect(result.status).toBe(400)
    expect(result.body.error?.issues?.[0]).toMatchObject({
      field: 'textBody',
      message: expect.stringContaining('TEMPLATE_MEMORY_LIMIT'),
    })
    // The same loops over small lists are fine.
    const small = await operator(
      'POST',
      '/v1/templates/preview',
      draft('{% for a in items %}{% for b in items %}.{% endfor %}{% endfor %}', { model: { items: [1, 2, 3] } }),
    )
    expect(small.status).toBe(200)
  })

  it('a render that takes longer than TEMPLATE_RENDER_LIMIT_MS is refused by name (locally, where the clock moves)', async () => {
    const busy = '{% for i in (1..900000) %}{% assign x = i | plus: 1 %}{% endfor %}'
    const result = await operator('POST', '/v1/templates/preview', draft(busy), {
      TEMPLATE_RENDER_LIMIT_MS: '100',
      TEMPLATE_RENDER_STEPS: '100000000',
      TEMPLATE_MEMORY_LIMIT: '100000000',
    })
    expect(result.status).toBe(400)
    expect(result.body.error?.issues).toEqual([
      { field: 'textBody', message: expect.stringContaining('TEMPLATE_RENDER_LIMIT_MS') },
    ])
  })

  it('a part longer than the parse limit, and a subject longer than one header line, are refused by name', async () => {
    const parse = await operator('POST', '/v1/templates/preview', draft('x'.repeat(2000)), {
      TEMPLATE_PARSE_LIMIT: '1000',
    })
    expect(parse.status).toBe(400)
    expect(parse.body.error?.issues).toEqual([
      { field: 'textBody', message: expect.stringContaining('TEMPLATE_PARSE_LIMIT') },
    ])
    const subject = await operator('POST', '/v1/templates/preview', {
      ...draft('ok'),
      subject: '{% for i in (1..200) %}тема {% endfor %}',
    })
    expect(subject.status).toBe(400)
    expect(subject.body.error?.issues).toEqual([
      { field: 'subject', message: expect.stringContaining('998 characters') },
    ])
  })

  it('at materialize time, a template expensive for one event fails that event alone: 99 others of the batch are emailed', async () => {
    // A template whose cost grows with a field of the event, for the recipients of this test (locale
    // fr): cheap for the example it is saved with, 50 000 turns of its loop for the event at 37.
    const saved = await operator('PUT', '/v1/templates/ResponseCreated/fr/email', {
      subject: 'Nouvelle réponse',
      textBody: '{% assign n = proposedPrice | divided_by: 1000 %}{% for i in (1..n) %}.{% endfor %}',
      htmlBody: '<p>{{ projectTitle }}</p>',
    })
    expect(saved.status).toBe(200)
    const events = await Promise.all(
      Array.from({ length: 100 }, async (_, index) => {
        const userId = guid()
        await seedContact(userId, { locale: 'fr' })
        // One by one, so that each is rendered now, with its event (a digest renders when it closes).
        await env.DB.prepare(
          `INSERT INTO preferences (user_id, kind, channel, enabled, source, updated_at, mode)
           VALUES (?1, 'ResponseCreated', 'email', 1, 'api', ?2, 'instant')`,
        )
          .bind(userId, new Date().toISOString())
          .run()
        return freshInbound('response.created', (value) => {
          const data = value.data as { recipient: { userId: string }; proposedPrice: number }
          data.recipient.userId = userId
          data.proposedPrice = index === 37 ? 50_000_000 : 4500
        })
      }),
    )
    const result = await deliverBatch(events.map((body, index) => ({ id: `m${index}`, attempts: 1, body })))
    expect(result.retryMessages).toEqual([])
    expect(result.explicitAcks).toHaveLength(100)
    const eventIdOf = (index: number) => JSON.parse((events[index] as { body: string }).body).envelope.eventId as string
    await eventually(async () => {
      const dead = await env.DB.prepare('SELECT code, error FROM dead_letters WHERE event_id = ?1')
        .bind(eventIdOf(37))
        .first<{ code: string; error: string }>()
      expect(dead?.code).toBe('NTF_TEMPLATE_INVALID')
      // Deployed, where the clock stands still, the step limit is what stops a loop.
      expect(dead?.error).toContain('TEMPLATE_RENDER_STEPS')
    })
    await eventually(async () => {
      const { results } = await env.DB.prepare(
        `SELECT n.status FROM notifications n WHERE n.event_id IN (SELECT value FROM json_each(?1))`,
      )
        .bind(JSON.stringify(events.map((_, index) => eventIdOf(index)).filter((_, index) => index !== 37)))
        .all<{ status: string }>()
      expect(results).toHaveLength(99)
      for (const row of results) expect(row.status).toBe('sent')
    })
  })
})

describe("a template's errors, in the template's words", () => {
  it('a tag that reads another template is refused when parsed, naming the tag, with no word of the engine inside', async () => {
    for (const [field, source] of [
      ['textBody', "{% include 'header' %}"],
      ['htmlBody', "<p>{% render 'footer' %}</p>"],
      ['subject', "{% layout 'base' %}Тема"],
    ] as const) {
      const preview = await operator('POST', '/v1/templates/preview', { ...draft('ok'), [field]: source })
      expect(preview.status).toBe(400)
      const [issue] = preview.body.error?.issues ?? []
      expect(issue?.field).toBe(field)
      expect(issue?.message).toMatch(/\{% (include|render|layout) %\} is not available: a template is one text/)
      // LiquidJS's browser fallback for these reached for the DOM: "document is not defined".
      expect(issue?.message).not.toMatch(/document|not defined/)
    }
  })

  it("an error thrown inside the engine reads as the engine's failure at its place, not its internals", () => {
    const limits: TemplateLimits = {
      parseChars: 10_000,
      renderMs: 1_000,
      steps: 20_000,
      memory: 1_000_000,
      outputBytes: 100_000,
    }
    const model = {
      project: {
        get title(): string {
          throw new TypeError("Cannot read properties of undefined (reading 'internalSlot')")
        },
      },
    }
    const source = { kind: 'K', locale: 'en', channel: 'email', version: 1, subject: 's', htmlBody: '' }
    expect(() =>
      render({ ...source, textBody: 'Hi {{ project.title }}' } as TemplateSource, model, 'en', limits, {
        cache: false,
      }),
    ).toThrow(/^textBody could not be rendered: the template engine failed, line:1, col:\d+$/)
    // An error about a value keeps its words: the operator can act on it.
    expect(() =>
      render({ ...source, textBody: "{{ 1 | money: 'no such' }}" } as TemplateSource, {}, 'en', limits, {
        cache: false,
      }),
    ).toThrow(/Invalid currency code/)
  })
})
