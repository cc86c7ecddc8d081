/**
 * The doctor in the Worker: `GET /v1/health/config` names what stands between
 * this deployment and a delivered email — a placeholder sender, a missing key,
 * a paused transport, a domain Resend has not verified, a cron that does not
 * run — each with its fix; a sending-only key is no fault; a clean deployment
 * has no blocker. Only an admin may read it, and the console's overview shows
 * an admin the same findings.
 */
import { createExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it } from 'vitest'
import { configIssues, configOf } from '../src/config.ts'
import type { Finding } from '../src/health/findings.ts'
import { isPlaceholderDomain, isPlaceholderHost } from '../src/health/placeholders.ts'
import worker from '../src/index.ts'
import { FAKE_RESEND_DOMAINS, FAKE_RESEND_KEYS, FAKE_RESEND_TEAM_KEY_PREFIX, FAKE_RESEND_URL } from './fake-resend.ts'
import { ADMIN_TOKEN, guid, INGEST_TOKEN, runCron } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const VIEWER_TOKEN = 'test-viewer-token-0123456789'

type Answer = { findings: Finding[]; blockers: number; checkedAt: string }

async function doctor(vars: Record<string, string> = {}, token = ADMIN_TOKEN) {
  const response = await fetchWorker(
    '/v1/health/config',
    { headers: { authorization: `Bearer ${token}` } },
    { VIEWER_TOKEN, ...vars },
  )
  return { status: response.status, body: (await response.json()) as Answer }
}

const idsOf = (answer: Answer) => answer.findings.map((finding) => finding.id)
const find = (answer: Answer, id: string) => answer.findings.find((finding) => finding.id === id)

/** A deployment with nothing in the way: the resend transport, a verified domain, every secret, a real URL. */
const clean = {
  EMAIL_TRANSPORT: 'resend',
  RESEND_API_KEY: FAKE_RESEND_KEYS.full,
  RESEND_API_URL: FAKE_RESEND_URL,
  EMAIL_FROM: `notifications@${FAKE_RESEND_DOMAINS.verified}`,
  PUBLIC_URL: `https://notify.${FAKE_RESEND_DOMAINS.verified}`,
}

const setLastCronRun = (at: Date) =>
  env.DB.prepare(
    `INSERT INTO gauges (name, labels, value, updated_at) VALUES ('notify_maintenance_last_run_timestamp_seconds', '{}', ?1, ?2)
     ON CONFLICT (name, labels) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
  )
    .bind(at.getTime() / 1000, at.toISOString())
    .run()

afterEach(async () => {
  await env.DB.prepare('DELETE FROM transport_pauses').run()
})

describe('GET /v1/health/config', () => {
  it('names the placeholder sender of the default wrangler.toml as a blocker, with its fix', async () => {
    const { status, body } = await doctor()
    expect(status).toBe(200)
    expect(find(body, 'sender-placeholder')).toMatchObject({
      severity: 'blocker',
      message: expect.stringContaining('notify-edge.example'),
      fix: expect.stringContaining('EMAIL_FROM in wrangler.toml'),
    })
    expect(find(body, 'public-url-placeholder')?.severity).toBe('warning')
    expect(find(body, 'delivery-events-subscription')?.severity).toBe('info')
    expect(body.blockers).toBe(body.findings.filter((finding) => finding.severity === 'blocker').length)
    // Blockers first, then warnings, then notes.
    const order = body.findings.map((finding) => ['blocker', 'warning', 'info'].indexOf(finding.severity))
    expect(order).toEqual([...order].sort())
  })

  it('is for admins: a viewer and the ingest token get 403, no token 401', async () => {
    for (const token of [VIEWER_TOKEN, INGEST_TOKEN]) {
      const refused = await fetchWorker(
        '/v1/health/config',
        { headers: { authorization: `Bearer ${token}` } },
        { VIEWER_TOKEN },
      )
      expect(refused.status, token).toBe(403)
      expect(await refused.json()).toMatchObject({ error: { code: 'FORBIDDEN' } })
    }
    expect((await fetchWorker('/v1/health/config')).status).toBe(401)
  })

  it('resend without RESEND_API_KEY: a blocker naming the secret and its command, not a 500', async () => {
    const { status, body } = await doctor({ EMAIL_TRANSPORT: 'resend', PUBLIC_URL: clean.PUBLIC_URL })
    expect(status).toBe(200)
    expect(find(body, 'resend-key-missing')).toMatchObject({
      severity: 'blocker',
      fix: expect.stringContaining('npx wrangler secret put RESEND_API_KEY'),
    })
    // The schema refuses it too; the missing key is said once, by its own finding.
    expect(idsOf(body)).not.toContain('config-invalid')
  })

  it('a variable the schema refuses is a finding naming it, while every other route answers 500', async () => {
    const broken = { DISPATCH_LEASE_SECONDS: '1' }
    const { status, body } = await doctor(broken)
    expect(status).toBe(200)
    expect(find(body, 'config-invalid')).toMatchObject({
      severity: 'blocker',
      message: expect.stringContaining('DISPATCH_LEASE_SECONDS'),
    })
    const other = await fetchWorker('/v1/reviewers', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }, broken)
    expect(other.status).toBe(500)
  })

  it('the example secrets of .dev.vars.example are refused outside local development, and a token without variety anywhere', async () => {
    const examples = {
      UNSUBSCRIBE_SIGNING_KEY: 'dev-unsubscribe-signing-key-change-me-0123456789',
      CONSOLE_SESSION_KEY: 'dev-console-session-key-change-me-0123456789',
      VIEWER_TOKEN: 'dev-viewer-token-change-me',
    }
    const deployed = await doctor({ ...examples, PUBLIC_URL: 'https://notify.example.org' })
    const finding = find(deployed.body, 'config-invalid')
    expect(finding?.severity).toBe('blocker')
    for (const name of Object.keys(examples)) {
      expect(finding?.message).toContain(
        `${name} (is the example of .dev.vars.example, refused outside local development`,
      )
    }
    // Every other route answers CONFIG_INVALID rather than take a token anyone can read in the repository.
    const refused = await fetchWorker(
      '/v1/reviewers',
      { headers: { authorization: `Bearer ${examples.VIEWER_TOKEN}` } },
      { ...examples, PUBLIC_URL: 'https://notify.example.org' },
    )
    expect(refused.status).toBe(500)
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('CONFIG_INVALID')
    // On this machine they are what `npm start` runs with.
    expect(
      find((await doctor({ ...examples, PUBLIC_URL: 'http://127.0.0.1:8787' })).body, 'config-invalid'),
    ).toBeUndefined()
    // Sixteen characters of one kind are no token, wherever.
    expect(() => configOf({ ...env, VIEWER_TOKEN: 'a'.repeat(24), PUBLIC_URL: 'http://127.0.0.1:8787' })).toThrow(
      /VIEWER_TOKEN \(at least 10 different characters/,
    )
  })

  it('a dispatch lease under three Resend timeouts is refused, naming both variables; three exactly will do', async () => {
    const short = { DISPATCH_LEASE_SECONDS: '3' }
    const { body } = await doctor(short)
    const finding = find(body, 'config-invalid')
    expect(finding?.severity).toBe('blocker')
    expect(finding?.message).toContain('DISPATCH_LEASE_SECONDS')
    expect(finding?.message).toContain('RESEND_TIMEOUT_SECONDS')
    const other = await fetchWorker('/v1/reviewers', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }, short)
    expect(other.status).toBe(500)
    const { error } = (await other.json()) as { error: { code: string; message: string } }
    expect(error.code).toBe('CONFIG_INVALID')
    expect(error.message).toMatch(
      /DISPATCH_LEASE_SECONDS \(must be at least 3 × RESEND_TIMEOUT_SECONDS \(15 s\), so ≥ 45/,
    )

    expect(() => configOf({ ...env, DISPATCH_LEASE_SECONDS: '44' })).toThrow(/RESEND_TIMEOUT_SECONDS/)
    expect(configOf({ ...env, DISPATCH_LEASE_SECONDS: '45' }).DISPATCH_LEASE_SECONDS).toBe(45)
    const quick = configOf({ ...env, DISPATCH_LEASE_SECONDS: '3', RESEND_TIMEOUT_SECONDS: '1' })
    expect([quick.DISPATCH_LEASE_SECONDS, quick.RESEND_TIMEOUT_SECONDS]).toEqual([3, 1])
    // The default configuration keeps to it.
    expect(configOf(env)).toMatchObject({ DISPATCH_LEASE_SECONDS: 120, RESEND_TIMEOUT_SECONDS: 15 })
    // So does the doctor's check of a wrangler.toml, which holds the variables alone.
    expect(configIssues({ DISPATCH_LEASE_SECONDS: '30' }, 'present')).toEqual([
      { variable: 'DISPATCH_LEASE_SECONDS', message: expect.stringContaining('RESEND_TIMEOUT_SECONDS') },
    ])
    expect(configIssues({ DISPATCH_LEASE_SECONDS: '30', RESEND_TIMEOUT_SECONDS: '10' }, 'present')).toEqual([])
  })

  it('a paused transport: a blocker with its reason, since when, and the fix for its cause', async () => {
    const since = '2026-11-30T08:00:00.000Z'
    await env.DB.prepare(
      `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
       VALUES ('cloudflare', 'E_SENDER_NOT_VERIFIED', 'send_email: sender not verified', ?1, 3, ?1, NULL, ?1)`,
    )
      .bind(since)
      .run()
    const { body } = await doctor()
    const paused = find(body, 'transport-paused')
    expect(paused?.severity).toBe('blocker')
    expect(paused?.message).toContain(since)
    expect(paused?.message).toContain('E_SENDER_NOT_VERIFIED')
    expect(paused?.message).toContain('sender not verified')
    expect(paused?.fix).toMatch(/onboard the EMAIL_FROM domain to Cloudflare Email Sending/)
  })

  it('a sending-only key cannot list domains: a note, not a failure', async () => {
    const { body } = await doctor({ ...clean, RESEND_API_KEY: FAKE_RESEND_KEYS.sending })
    expect(find(body, 'sender-domain-unchecked')).toMatchObject({
      severity: 'info',
      message: expect.stringContaining('cannot check the domain with a sending-only key'),
    })
    expect(idsOf(body)).not.toContain('resend-key-refused')
  })

  it("asks Resend about the sender's domain: pending and unknown domains are blockers, an unknown key too", async () => {
    const pending = await doctor({ ...clean, EMAIL_FROM: `n@${FAKE_RESEND_DOMAINS.pending}` })
    expect(find(pending.body, 'sender-domain-unverified')).toMatchObject({
      severity: 'blocker',
      message: expect.stringContaining('pending'),
    })
    const unknown = await doctor({ ...clean, EMAIL_FROM: 'n@elsewhere.notify-edge-fake.dev' })
    expect(find(unknown.body, 'sender-domain-not-found')?.severity).toBe('blocker')
    const revoked = await doctor({ ...clean, RESEND_API_KEY: 're_revoked_key' })
    expect(find(revoked.body, 'resend-key-refused')).toMatchObject({
      severity: 'blocker',
      message: expect.stringContaining('invalid_api_key'),
    })
  })

  it('the cron: never run and long not run are blockers; a run it recorded clears them', async () => {
    await env.DB.prepare("DELETE FROM gauges WHERE name = 'notify_maintenance_last_run_timestamp_seconds'").run()
    expect(find((await doctor()).body, 'cron-stale')?.message).toMatch(/has never run/)
    await setLastCronRun(new Date(Date.now() - 10 * 60_000))
    expect(find((await doctor()).body, 'cron-stale')?.message).toMatch(/has not run in the last 5 minutes/)
    await runCron(new Date())
    expect(idsOf((await doctor()).body)).not.toContain('cron-stale')
  })

  it('a database it cannot read (migrations not applied): a blocker naming the error and the migrations', async () => {
    const unmigrated = {
      prepare: (sql: string) => env.DB.prepare(sql),
      batch: async () => {
        throw new Error('D1_ERROR: no such table: transport_pauses: SQLITE_ERROR')
      },
    }
    const response = await worker.fetch(
      new Request('http://worker/v1/health/config', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
      { ...env, DB: unmigrated } as unknown as Env,
      createExecutionContext(),
    )
    expect(response.status).toBe(200)
    const body = (await response.json()) as Answer
    expect(find(body, 'database-unreadable')).toMatchObject({
      severity: 'blocker',
      message: expect.stringContaining('no such table: transport_pauses'),
      fix: expect.stringContaining('npm run deploy (it applies the migrations before the code)'),
    })
  })

  it('a stored template in effect that does not render its example: a blocker when it cannot parse, a warning when a limit stops it', async () => {
    // Saved under older rules, or before a limit was lowered: written as the store keeps it.
    const store = (locale: string, textBody: string) =>
      env.DB.prepare(
        `INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at)
         VALUES ('InvitationCreated', ?1, 'email', 1, 'Subject', ?2, '<p>ok</p>', 1, ?3)`,
      )
        .bind(locale, textBody, new Date().toISOString())
        .run()
    await setLastCronRun(new Date())
    try {
      await store('zz-loop', '{% for i in (1..3000) %}.{% endfor %}')
      const lowered = await doctor({ ...clean, TEMPLATE_RENDER_STEPS: '5000' })
      expect(find(lowered.body, 'templates-refused')).toMatchObject({
        severity: 'warning',
        message: expect.stringContaining(
          'InvitationCreated/zz-loop/email version 1 (textBody renders more than the limit of 5000',
        ),
      })
      // The default limits hold it: nothing to say.
      expect(idsOf((await doctor(clean)).body)).not.toContain('templates-refused')

      await store('zz-tokens', '{{a}}'.repeat(6000))
      const unparseable = await doctor(clean)
      expect(find(unparseable.body, 'templates-refused')).toMatchObject({
        severity: 'blocker',
        message: expect.stringContaining(
          'InvitationCreated/zz-tokens/email version 1 (textBody has 6000 Liquid tokens',
        ),
        fix: expect.stringContaining('PUT /v1/templates/{kind}/{locale}/{channel}'),
      })
      expect(unparseable.body.blockers).toBe(1)
    } finally {
      await env.DB.prepare("DELETE FROM templates WHERE locale LIKE 'zz-%'").run()
    }
  })

  it('a clean deployment has no blocker and no warning', async () => {
    await setLastCronRun(new Date())
    const { body } = await doctor(clean)
    expect(body.findings.filter((finding) => finding.severity !== 'info')).toEqual([])
    expect(body.blockers).toBe(0)
  })
})

describe('placeholders', () => {
  it('are the names RFC 2606 and RFC 6761 reserve, and the example workers.dev account', () => {
    for (const name of ['notify-edge.example', 'a.test', 'x.invalid', 'localhost', 'example.com', 'mail.example.org']) {
      expect(isPlaceholderDomain(name), name).toBe(true)
    }
    for (const name of ['arthunt.ru', 'example.co', 'examples.com', 'notexample.com']) {
      expect(isPlaceholderDomain(name), name).toBe(false)
    }
    expect(isPlaceholderHost('notify-edge.example.workers.dev')).toBe(true)
    expect(isPlaceholderHost('notify-edge.acme.workers.dev')).toBe(false)
  })
})

describe('the console', () => {
  /** `path` as `token`'s operator sees it with `vars` set. */
  async function pageAs(token: string, path = '/console', vars: Record<string, string> = {}) {
    const all = { ...env, VIEWER_TOKEN, ...vars } as Env
    const signIn = await worker.fetch(
      new Request('http://worker/console/sign-in', {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
        body: new URLSearchParams({ token }).toString(),
      }),
      all,
      createExecutionContext(),
    )
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
    const page = await worker.fetch(
      new Request(`http://worker${path}`, { headers: { cookie } }),
      all,
      createExecutionContext(),
    )
    expect(page.status).toBe(200)
    return page.text()
  }
  const overviewAs = (token: string) => pageAs(token)

  it("shows an admin the doctor's blockers and warnings with their fixes at the top", async () => {
    const html = await overviewAs(ADMIN_TOKEN)
    const panel = /<section id="findings"[\s\S]*?<\/section>/.exec(html)?.[0] ?? ''
    expect(panel).toContain('data-finding="sender-placeholder"')
    expect(panel).toContain('data-finding="public-url-placeholder"')
    expect(panel).toContain('EMAIL_FROM in wrangler.toml')
    // Notes stay in the doctor's full list.
    expect(panel).not.toContain('data-finding="delivery-events-subscription"')
    expect(html.indexOf('id="findings"')).toBeLessThan(html.indexOf('id="transport-state"'))
    // Listed here, so not again in the line the other pages carry.
    expect(html).not.toContain('id="health"')
  })

  it('shows a viewer how many findings there are, not which: the route that lists them is an admin’s', async () => {
    const html = await overviewAs(VIEWER_TOKEN)
    expect(html).toContain('id="transport-state"')
    expect(html).not.toContain('id="findings"')
    expect(html).not.toContain('data-finding')
    expect(html).not.toContain('sender-placeholder')
    expect(html).toMatch(
      /<p id="health" class="error"><strong>Configuration: [1-9]\d* blockers?, \d+ warnings?<\/strong>/,
    )
  })

  it('carries a line for the findings at the top of every other page, linking to their fixes', async () => {
    for (const path of ['/console/dead-letters', '/console/templates', '/console/audit', '/console/events']) {
      const html = await pageAs(ADMIN_TOKEN, path)
      const line = /<p id="health"[\s\S]*?<\/p>/.exec(html)?.[0] ?? ''
      expect(line, path).toContain('<code>sender-placeholder</code>')
      expect(line, path).toContain('href="/console#findings"')
      // Above the page's own heading.
      expect(html.indexOf('id="health"'), path).toBeLessThan(html.indexOf('<h1>'))
    }
    // A deployment with nothing in the way: no line.
    await setLastCronRun(new Date())
    expect(await pageAs(ADMIN_TOKEN, '/console/dead-letters', clean)).not.toContain('id="health"')
  })

  it('shows a paused transport at the top of every page, with how many notifications wait for it', async () => {
    const since = '2026-11-30T08:00:00.000Z'
    const before = await pageAs(VIEWER_TOKEN, '/console/templates')
    expect(before).not.toContain('transport is paused')
    await env.DB.prepare(
      `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
       VALUES ('cloudflare', 'E_SENDER_NOT_VERIFIED', 'send_email: sender not verified', ?1, 3, ?1, NULL, ?1)`,
    )
      .bind(since)
      .run()
    const { results } = await env.DB.prepare("SELECT count(*) AS n FROM notifications WHERE status = 'paused'").all<{
      n: number
    }>()
    for (const path of ['/console', '/console/templates']) {
      const html = await pageAs(VIEWER_TOKEN, path)
      expect(html, path).toContain(
        '<strong>The cloudflare transport is paused</strong> since <time datetime="2026-11-30T08:00:00.000Z"',
      )
      expect(html, path).toContain(`(E_SENDER_NOT_VERIFIED): ${results[0]?.n ?? 0} notification(s) wait`)
    }
  })

  it("asks Resend about the sender's domain at most once a minute for the pages; the doctor always asks", async () => {
    const key = `${FAKE_RESEND_TEAM_KEY_PREFIX}${guid()}`
    const vars = {
      ...clean,
      RESEND_API_KEY: key,
      EMAIL_FROM: `notifications@${guid().slice(0, 8)}.notify-edge-fake.dev`,
    }
    const lists = async () =>
      ((await (await fetch(`${FAKE_RESEND_URL}/control/domain-lists?key=${key}`)).json()) as { count: number }).count
    const first = await pageAs(ADMIN_TOKEN, '/console/templates', vars)
    expect(first).toContain('<code>sender-domain-not-found</code>')
    await pageAs(ADMIN_TOKEN, '/console/dead-letters', vars)
    await pageAs(VIEWER_TOKEN, '/console', vars)
    expect(await lists()).toBe(1)
    // The doctor asks, and leaves its answer for the pages.
    expect(find((await doctor(vars)).body, 'sender-domain-not-found')?.severity).toBe('blocker')
    expect(await lists()).toBe(2)
    await pageAs(ADMIN_TOKEN, '/console', vars)
    expect(await lists()).toBe(2)
    // A minute later, the next page asks again.
    await env.DB.prepare('UPDATE health_checks SET checked_at = ?1')
      .bind(new Date(Date.now() - 61_000).toISOString())
      .run()
    const later = await pageAs(ADMIN_TOKEN, '/console', vars)
    expect(await lists()).toBe(3)
    expect(later).toContain('data-finding="sender-domain-not-found"')
  })
})
