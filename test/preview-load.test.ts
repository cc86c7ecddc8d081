/**
 * A template preview is asked for by any operator, a viewer too, and renders
 * in the isolate that runs the queue consumers. These tests hold what keeps
 * previews from taking the Worker from the pipeline: a render limit that does
 * not need the clock (deployed, the clock stands still while a render runs),
 * a tenth of the pipeline's limits for previews and saves, and one render at a
 * time per operator.
 */
import { createExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { AT_ONCE, TURN_STALE_MS, takeTurn } from '../src/api/render-turns.ts'
import { configOf } from '../src/config.ts'
import worker from '../src/index.ts'
import { PREVIEW_SHARE, previewLimits, render, TemplateError, type TemplateSource } from '../src/templates/sandbox.ts'
import { ADMIN_TOKEN, eventually } from './helpers.ts'

const VIEWER_TOKEN = 'test-viewer-token-for-previews-0123456789'

async function call(path: string, init: RequestInit = {}) {
  const response = await worker.fetch(
    new Request(`http://worker${path}`, { redirect: 'manual', ...init }),
    { ...env, VIEWER_TOKEN } as Env,
    createExecutionContext(),
  )
  return { status: response.status, headers: response.headers, text: await response.text() }
}

const draft = (textBody: string) => ({
  kind: 'ResponseCreated',
  locale: 'ru',
  subject: 'Тема',
  textBody,
  htmlBody: '<p>ok</p>',
})

const preview = (body: unknown, token = ADMIN_TOKEN) =>
  call('/v1/templates/preview', {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })

const source = (textBody: string): TemplateSource => ({
  kind: 'K',
  locale: 'en',
  channel: 'email',
  version: 0,
  subject: 's',
  textBody,
  htmlBody: 'h',
})

describe('render limits that hold where the clock stands still', () => {
  it('a part stops after TEMPLATE_RENDER_STEPS template nodes, whatever time is left', () => {
    // A loop the memory limit allows (10 000 units), with all the time in the world: only
    // the count of rendered nodes can stop it. The model counts how often it was read.
    let reads = 0
    const model = {
      probe: {
        get value() {
          reads += 1
          return 'x'
        },
      },
    }
    const limits = { ...configOf(env).templateLimits, renderMs: 600_000, steps: 1000 }
    expect(() =>
      render(source('{% for i in (1..10000) %}{{ probe.value }}{% endfor %}'), model, 'en', limits, { cache: false }),
    ).toThrow(/^textBody renders more than the limit of 1000 template nodes .*\(TEMPLATE_RENDER_STEPS\)$/)
    // Each turn of the loop is two checks (the loop's body, then its one output).
    expect(reads).toBeGreaterThan(0)
    expect(reads).toBeLessThanOrEqual(500)
  })

  it("a preview and a save have a tenth of the pipeline's limits: a loop the pipeline renders is refused there, naming the share", async () => {
    const pipeline = configOf(env).templateLimits
    const limits = previewLimits(pipeline)
    expect(limits).toMatchObject({
      steps: pipeline.steps / PREVIEW_SHARE,
      memory: pipeline.memory / PREVIEW_SHARE,
      renderMs: pipeline.renderMs / PREVIEW_SHARE,
      parseChars: pipeline.parseChars,
      outputBytes: pipeline.outputBytes,
    })
    // Two nodes a turn: three times the preview's steps, a third of the pipeline's.
    const turns = Math.ceil((limits.steps * 3) / 2)
    const loop = `{% for i in (1..${turns}) %}.{% endfor %}`
    expect(render(source(loop), {}, 'en', pipeline, { cache: false }).text).toBe('.'.repeat(turns))

    const refused = await preview(draft(loop))
    expect(refused.status).toBe(400)
    expect(JSON.parse(refused.text).error.issues).toEqual([
      {
        field: 'textBody',
        message: expect.stringContaining(`limit of ${limits.steps} template nodes`),
      },
    ])
    expect(refused.text).toContain(`a preview's and a save's: 1/${PREVIEW_SHARE} of TEMPLATE_RENDER_STEPS`)

    const before = await env.DB.prepare("SELECT count(*) AS n FROM templates WHERE kind = 'ResponseCreated'").first()
    const save = await call('/v1/templates/ResponseCreated/ru/email', {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ subject: 'Тема', textBody: loop, htmlBody: '<p>ok</p>' }),
    })
    expect(save.status).toBe(400)
    expect(save.text).toContain('TEMPLATE_RENDER_STEPS')
    expect(await env.DB.prepare("SELECT count(*) AS n FROM templates WHERE kind = 'ResponseCreated'").first()).toEqual(
      before,
    )
    // Every default template previews within the share with its example.
    const fine = await preview({ kind: 'ResponseCreated.digest', locale: 'en' })
    expect(fine.status).toBe(200)
  })
})

describe('hostile templates, each stopped by a named limit', () => {
  // Found by reading the engine as an attacker would: the work hides inside one node — a filter
  // or a comparison over a long list or string, a capture that doubles — or in the parse itself,
  // where the step limit counts little. Each took from a second to minutes of CPU at a preview's
  // limits, or took the process down, before its limit was charged.
  const range = '{% assign r = (1..90000) %}'
  const long = `{% assign s = "${'x'.repeat(90_000)}" %}`
  const numbers = Array.from({ length: 95_000 }, (_, index) => index % 10)
  const objects = Array.from({ length: 60_000 }, (_, index) => ({ a: index % 7 }))
  const cases: [string, string, Record<string, unknown>, TemplateError['limit']][] = [
    [
      'a capture doubled 24 times',
      `{% capture s %}xxxxxxxxxxxxxxxx{% endcapture %}${'{% capture s %}{{s}}{{s}}{% endcapture %}'.repeat(24)}{{ s | size }}`,
      {},
      'memory',
    ],
    [
      'a filter chain handing a range on',
      `${range}{{ r${' | find_exp: "i", "i == -1" | default: r'.repeat(30)} | size }}`,
      {},
      'memory',
    ],
    [
      '`has` over a range, again and again',
      `${range}{{ r${' | has: "x", 1 | default: r'.repeat(30)} | size }}`,
      {},
      'memory',
    ],
    [
      '`contains` over a range in one condition',
      `${range}{% if r contains -1${' or r contains -1'.repeat(30)} %}y{% endif %}`,
      {},
      'memory',
    ],
    ['`sum` of a long list in every output', '{{ n | sum }}'.repeat(1990), { n: numbers }, 'memory'],
    ['`sum` of a property of many objects', '{{ n | sum: "a" }}'.repeat(1990), { n: objects }, 'memory'],
    ['`replace` that shrinks a long string', `${long}${'{{ s | replace: "x", "" }}'.repeat(30)}`, {}, 'memory'],
    ['`slice` walking a long string', `${long}${'{{ s | slice: 89999 }}'.repeat(30)}`, {}, 'memory'],
    [
      '`==` between long lists',
      `{% if n == m${' or n == m'.repeat(300)} %}y{% endif %}`,
      { n: numbers, m: numbers },
      'memory',
    ],
    [
      '`case` over long lists',
      `{% case n %}${'{% when m %}y'.repeat(300)}{% endcase %}`,
      { n: numbers, m: numbers },
      'memory',
    ],
    ['`where_exp` over a long list', '{{ n | where_exp: "i", "i == 3" | size }}', { n: numbers }, 'memory'],
    [
      '`date` with a time zone, many times',
      '{{ "2024-01-01T00:00:00Z" | date: "%c", "America/New_York" }}'.repeat(1990),
      {},
      'memory',
    ],
    ['forty thousand outputs to parse', '{{a}}'.repeat(39_980), {}, 'parse'],
    ['a `{% liquid %}` tag of 15 000 lines', `{% liquid${'\nassign a = 1'.repeat(15_000)} %}`, {}, 'parse'],
    ['a condition of 40 000 `or`s', `{% if a${' or a'.repeat(40_000)} %}{% endif %}`, {}, 'parse'],
  ]

  it.each(cases)('%s', (_, textBody, model, limit) => {
    // With all the time in the world, as deployed: only the limits that need no clock may stop it.
    const limits = { ...previewLimits(configOf(env).templateLimits), renderMs: 600_000 }
    let thrown: unknown
    try {
      render(source(textBody), model, 'en', limits, { cache: false })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(TemplateError)
    expect((thrown as TemplateError).part).toBe('textBody')
    expect((thrown as TemplateError).limit).toBe(limit)
  })

  it('what a real email needs is within every limit: a digest of 500 with a filter on each field renders', () => {
    const items = Array.from({ length: 500 }, (_, index) => ({
      actorName: `Actor ${index}`,
      projectTitle: `Project number ${index} with a longer title`,
      proposedPrice: 1000 + index,
      when: '2026-12-01T10:00:00Z',
    }))
    const body =
      '{% for item in items %}{% case item.proposedPrice %}{% when 0 %}free{% else %}{{ item.proposedPrice | money: "RUB" }}{% endcase %} {{ item.actorName | upcase }} «{{ item.projectTitle | truncate: 30 }}» {{ item.when | date: "%d.%m" }}{% if item.actorName contains "7" %}*{% endif %}\n{% endfor %}'
    const rendered = render(source(body), { items }, 'ru', configOf(env).templateLimits, { cache: false })
    expect(rendered.text.split('\n')).toHaveLength(501)
  })
})

describe('one render at a time per operator', () => {
  it("while an operator's preview is still being read, the same operator's others are answered 429 before theirs are; another operator's are not", async () => {
    // A preview whose body does not end until the test says so: it holds its turn meanwhile.
    let finish = () => {}
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(JSON.stringify(draft('Held {{ projectTitle }}')).slice(0, -1)))
        finish = () => {
          controller.enqueue(new TextEncoder().encode('}'))
          controller.close()
        }
      },
    })
    const held = call('/v1/templates/preview', {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit)
    try {
      // Until the held preview has taken its turn, a probe renders (200); from then on, none does.
      await eventually(async () => expect((await preview(draft('probe'))).status).toBe(429))

      const others = await Promise.all(Array.from({ length: 19 }, () => preview(draft('{{ projectTitle }}'))))
      for (const answer of others) {
        expect(answer.status).toBe(429)
        expect(answer.headers.get('retry-after')).toBe('1')
        expect(JSON.parse(answer.text).error.code).toBe('TOO_MANY_PREVIEWS')
      }
      // A save by the same operator waits its turn too, and saves nothing.
      const save = await call('/v1/templates/ResponseCreated/ru/email', {
        method: 'PUT',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ subject: 'Тема', textBody: 'busy', htmlBody: '<p>busy</p>' }),
      })
      expect(save.status).toBe(429)

      // The console's preview is the same operator's (signed in with the admin token): its page says so.
      const signedIn = await call('/console/sign-in', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
        body: new URLSearchParams({ token: ADMIN_TOKEN }).toString(),
      })
      const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
      const page = await call('/console/templates/ResponseCreated/ru/email', { headers: { cookie } })
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)?.[1] ?? ''
      expect(csrf).not.toBe('')
      const consolePreview = await call('/console/templates/ResponseCreated/ru/email/preview', {
        method: 'POST',
        headers: { cookie, origin: 'http://worker', 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf, subject: 'Тема', textBody: 'x', htmlBody: '<p>x</p>' }).toString(),
      })
      expect(consolePreview.status).toBe(429)
      expect(consolePreview.headers.get('retry-after')).toBe('1')
      expect(consolePreview.text).toContain('still rendering')

      // Another operator (the viewer token) previews meanwhile.
      const viewer = await preview(draft('Viewer {{ projectTitle }}'), VIEWER_TOKEN)
      expect(viewer.status).toBe(200)
      expect(JSON.parse(viewer.text).text).toMatch(/^Viewer /)
    } finally {
      finish()
    }
    const answer = await held
    expect(answer.status).toBe(200)
    expect(JSON.parse(answer.text).text).toMatch(/^Held /)
    // The turn is given back: the next preview renders.
    expect((await preview(draft('after'))).status).toBe(200)
  })
})

describe('turns', () => {
  // Times far from now, so that no request of another test holds a turn among these.
  const at = Date.now() + 10 * TURN_STALE_MS

  it('a turn is given back by its own release; at most AT_ONCE operators hold one', () => {
    const releases = Array.from({ length: AT_ONCE }, (_, index) => takeTurn(`turns-${index}`, at))
    for (const release of releases) expect(typeof release).toBe('function')
    expect(takeTurn('turns-0', at)).toBe('yours')
    expect(takeTurn('turns-one-more', at)).toBe('full')
    for (const release of releases) if (typeof release === 'function') release()
    const again = takeTurn('turns-0', at)
    expect(typeof again).toBe('function')
    if (typeof again === 'function') again()
  })

  it('a turn whose request never ended (its client went away, its finally never ran) is taken over once stale', () => {
    const lost = takeTurn('turns-lost', at)
    expect(typeof lost).toBe('function')
    expect(takeTurn('turns-lost', at + TURN_STALE_MS - 1)).toBe('yours')
    const next = takeTurn('turns-lost', at + TURN_STALE_MS)
    expect(typeof next).toBe('function')
    // The lost request's release, should it run late, does not give back the turn taken after it.
    if (typeof lost === 'function') lost()
    expect(takeTurn('turns-lost', at + TURN_STALE_MS + 1)).toBe('yours')
    if (typeof next === 'function') next()
  })
})
