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
import { CIRCUIT_OPEN } from '../src/dispatch/circuit.ts'
import { type Deployment, type Finding, findingsOf } from '../src/health/findings.ts'
import { isPlaceholderDomain, isPlaceholderHost } from '../src/health/placeholders.ts'
import { CIRCUIT_OPEN_CODE } from '../src/health/providers.ts'
import worker from '../src/index.ts'
import { FAKE_RESEND_DOMAINS, FAKE_RESEND_KEYS, FAKE_RESEND_TEAM_KEY_PREFIX, FAKE_RESEND_URL } from './fake-resend.ts'
import { ADMIN_TOKEN, guid, INGEST_TOKEN, pendingNotification, runCron } from './helpers.ts'
import { allRows, shardDbs, userInShard } from './shards.ts'
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

/** Both transports, cloudflare first, as a clean deployment has them. */
const failover = { ...clean, EMAIL_TRANSPORT: 'cloudflare', EMAIL_TRANSPORTS: 'cloudflare,resend' }

/** Pauses `transport` in `db` (the primary unless said): a refusal's code, or an open circuit (`circuit-open`). */
async function pause(transport: string, code: string, reason: string, db: D1Database = env.DB) {
  const since = '2026-11-30T08:00:00.000Z'
  const probeAt = '2026-11-30T08:10:00.000Z'
  await db
    .prepare(
      `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
       VALUES (?1, ?2, ?3, ?4, 1, ?5, NULL, ?4)`,
    )
    .bind(transport, code, reason, since, probeAt)
    .run()
  return { since, probeAt }
}

const OPEN_REASON = '5 or more failures in a row that say the provider may be down (the last: http-503)'

afterEach(async () => {
  for (const db of shardDbs()) await db.prepare('DELETE FROM transport_pauses').run()
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

  it('with EMAIL_TRANSPORTS, every transport is checked: resend standby still needs its key and a domain Resend verified', async () => {
    const keyless = await doctor({ EMAIL_TRANSPORTS: 'cloudflare,resend', PUBLIC_URL: clean.PUBLIC_URL })
    expect(find(keyless.body, 'resend-key-missing')).toMatchObject({
      severity: 'blocker',
      message: expect.stringContaining('EMAIL_TRANSPORTS names resend and RESEND_API_KEY is not set'),
    })
    expect(idsOf(keyless.body)).not.toContain('config-invalid')
    // Resend is asked about the sender's domain though cloudflare comes first; the binding's notes stand too.
    const pending = await doctor({ ...failover, EMAIL_FROM: `n@${FAKE_RESEND_DOMAINS.pending}` })
    expect(find(pending.body, 'sender-domain-unverified')?.severity).toBe('blocker')
    expect(find(pending.body, 'delivery-events-subscription')?.severity).toBe('info')
    await setLastCronRun(new Date())
    const ready = await doctor(failover)
    expect(ready.body.findings.filter((finding) => finding.severity !== 'info')).toEqual([])
    expect(idsOf(ready.body)).toEqual(
      expect.arrayContaining(['delivery-events-subscription', 'sender-domain-unchecked']),
    )
  })

  it('each transport that cannot send is named: a warning while the other carries the mail, blockers when none can', async () => {
    await setLastCronRun(new Date())
    const { since, probeAt } = await pause('resend', 'invalid_api_key', 'API key is invalid')
    const one = await doctor(failover)
    expect(find(one.body, 'transport-paused')).toMatchObject({
      severity: 'warning',
      message: expect.stringContaining(
        `the resend transport is paused since ${since} (invalid_api_key): API key is invalid. Mail goes through cloudflare meanwhile; one is tried through it at a time, next at ${probeAt}`,
      ),
      fix: expect.stringContaining('npx wrangler secret put RESEND_API_KEY'),
    })
    expect(one.body.blockers).toBe(0)

    await pause('cloudflare', 'circuit-open', OPEN_REASON)
    const both = await doctor(failover)
    expect(find(both.body, 'transport-circuit-open')).toMatchObject({
      severity: 'blocker',
      message: expect.stringContaining(
        `the cloudflare transport's circuit is open since ${since}: ${OPEN_REASON}. No configured transport can send: notifications wait as paused`,
      ),
      fix: expect.stringContaining('the circuit closes by itself'),
    })
    expect(find(both.body, 'transport-paused')?.severity).toBe('blocker')
    expect(both.body.blockers).toBe(2)
    // A pause of a transport the configuration no longer names stands in nobody's way.
    expect(idsOf((await doctor(clean)).body)).not.toContain('transport-circuit-open')
  })

  it('reads an open circuit by the code the dispatcher writes for it', () => {
    expect(CIRCUIT_OPEN_CODE).toBe(CIRCUIT_OPEN)
  })

  it('a pause in the last D1 shard alone is the transport’s', async () => {
    const last = shardDbs().at(-1) as D1Database
    await pause('cloudflare', 'E_SENDER_NOT_VERIFIED', 'send_email: sender not verified', last)
    expect(find((await doctor()).body, 'transport-paused')).toMatchObject({
      severity: 'blocker',
      message: expect.stringContaining('Its notifications wait as paused'),
    })
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

describe('the rules of a wrangler.toml with EMAIL_TRANSPORTS', () => {
  const deployment = (vars: Record<string, string>, bindings: string[]): Deployment => ({
    source: 'wrangler.toml',
    vars: { EMAIL_FROM: clean.EMAIL_FROM, PUBLIC_URL: clean.PUBLIC_URL, ...vars },
    invalid: [],
    bindings,
    now: new Date(),
  })
  const fixed = ['DB', 'IDEMPOTENCY', 'EVENTS', 'DISPATCH', 'DLQ', 'EMAIL_EVENTS', 'INBOX', 'AUTH_FAILURES']

  it("need each transport's binding: send_email for cloudflare, the send pace for resend, wherever it stands", () => {
    const missing = (vars: Record<string, string>, bindings: string[]) =>
      findingsOf(deployment(vars, bindings)).find((finding) => finding.id === 'bindings-missing')?.message
    expect(missing({ EMAIL_TRANSPORTS: 'resend,cloudflare' }, fixed)).toMatch(/^not bound: EMAIL, SEND_PACE;/)
    expect(missing({ EMAIL_TRANSPORTS: 'resend,cloudflare' }, [...fixed, 'SEND_PACE'])).toMatch(/^not bound: EMAIL;/)
    expect(missing({ EMAIL_TRANSPORTS: 'cloudflare' }, [...fixed, 'EMAIL'])).toBeUndefined()
    // EMAIL_TRANSPORTS takes EMAIL_TRANSPORT's place.
    expect(missing({ EMAIL_TRANSPORT: 'resend', EMAIL_TRANSPORTS: 'cloudflare' }, [...fixed, 'EMAIL'])).toBeUndefined()
  })

  it("ask of the sender's domain what each transport asks, and note the binding's delivery events", () => {
    const findings = findingsOf(
      deployment({ EMAIL_TRANSPORTS: 'cloudflare, resend', EMAIL_FROM: 'notifications@notify-edge.example' }, fixed),
    )
    expect(findings.find((finding) => finding.id === 'sender-placeholder')?.fix).toBe(
      'set EMAIL_FROM in wrangler.toml to an address on a domain onboarded to Cloudflare Email Sending and verified in Resend (resend.com/domains), then npm run deploy',
    )
    expect(findings.map((finding) => finding.id)).toContain('delivery-events-subscription')
    // A wrangler.toml holds no pause: none is reported.
    expect(findings.map((finding) => finding.id)).not.toContain('transport-paused')
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

  /** The overview's row of `transport` in its table of transports. */
  const transportRow = (html: string, transport: string) =>
    new RegExp(`<tr><td data-label="Transport"><span>${transport}</span>(?:(?!</tr>).)*</tr>`, 's').exec(html)?.[0] ??
    ''

  /**
   * An email sent through `transport` `minutesAgo` minutes ago, its row in D1 shard `shard` (the one
   * database, where there is one); `channel` in-app makes it no email.
   */
  async function sent(transport: string, minutesAgo: number, shard: number, channel = 'email') {
    const dbs = shardDbs()
    const userId = await userInShard(shard, dbs.length)
    const id = await pendingNotification(`sent-${guid().slice(0, 8)}@example.com`, { userId })
    await (dbs[shard % dbs.length] as D1Database)
      .prepare(`UPDATE notifications SET status = 'sent', channel = ?2, transport = ?3, sent_at = ?4 WHERE id = ?1`)
      .bind(id, channel, transport, new Date(Date.now() - minutesAgo * 60_000).toISOString())
      .run()
  }

  it("shows each transport's state on the overview, with its share of the last hour's emails", async () => {
    // Spread over the D1 shards, where there are several: the page counts them together.
    await sent('cloudflare', 5, 0)
    await sent('cloudflare', 30, 1)
    await sent('cloudflare', 59, 0)
    await sent('resend', 10, 1)
    // Neither an email sent before the hour nor an in-app item is counted.
    await sent('resend', 61, 0)
    await sent('resend', 1, 1, 'in-app')
    // What the page counts, as a plain reading of every shard says it (other tests may have sent too).
    const since = new Date(Date.now() - 3_600_000).toISOString()
    const counted = await allRows<{ transport: string; n: number }>(
      `SELECT transport, count(*) AS n FROM notifications
       WHERE status = 'sent' AND channel = 'email' AND sent_at >= ?1 GROUP BY transport`,
      since,
    )
    const count = (transport: string) =>
      counted.filter((row) => row.transport === transport).reduce((sum, row) => sum + row.n, 0)
    const [cloudflare, resend] = [count('cloudflare'), count('resend')]
    expect(cloudflare).toBeGreaterThanOrEqual(3)
    expect(resend).toBeGreaterThanOrEqual(1)
    const share = (n: number) => `${Math.round((n / (cloudflare + resend)) * 100)} %`

    const html = await pageAs(VIEWER_TOKEN, '/console', failover)
    const active = transportRow(html, 'cloudflare')
    expect(active).toContain('data-state="active"')
    expect(active).toContain('mail goes through it')
    expect(active).toContain(
      `<span>${cloudflare}</span></td><td class="num" data-label="Share"><span>${share(cloudflare)}`,
    )
    const standby = transportRow(html, 'resend')
    expect(standby).toContain('data-state="standby"')
    expect(standby).toContain('takes the mail when cloudflare cannot')
    expect(standby).toContain(`<span>${resend}</span></td><td class="num" data-label="Share"><span>${share(resend)}`)
    // Nothing in the way: no banner.
    expect(html).not.toContain('data-transport=')

    // One transport alone: its row, and the same count.
    const alone = await pageAs(VIEWER_TOKEN, '/console')
    expect(transportRow(alone, 'cloudflare')).toContain('data-state="active"')
    expect(transportRow(alone, 'resend')).toContain('not configured')
  })

  it('shows a paused transport and an open circuit: a note while the other carries the mail, an alert when none can', async () => {
    const { since, probeAt } = await pause('resend', 'invalid_api_key', 'API key is invalid')
    const one = await pageAs(VIEWER_TOKEN, '/console', failover)
    const paused = transportRow(one, 'resend')
    expect(paused).toContain('data-state="paused"')
    expect(paused).toContain(`<code>invalid_api_key</code> since <time datetime="${since}"`)
    expect(paused).toContain('API key is invalid')
    expect(paused).toContain(`<time datetime="${probeAt}"`)
    expect(transportRow(one, 'cloudflare')).toContain('data-state="active"')
    const note = /<div class="note" role="status" data-transport="resend">[\s\S]*?<\/div>/.exec(one)?.[0] ?? ''
    expect(note).toContain('<strong>The resend transport is paused</strong>')
    expect(note).toContain('(invalid_api_key): mail goes through cloudflare meanwhile.')

    await pause('cloudflare', 'circuit-open', OPEN_REASON)
    const waiting = (await allRows<{ n: number }>("SELECT count(*) AS n FROM notifications WHERE status = 'paused'"))
      .map((row) => row.n)
      .reduce((sum, n) => sum + n, 0)
    const both = await pageAs(VIEWER_TOKEN, '/console/templates', failover)
    const alert = /<div class="error" role="alert" data-transport="cloudflare">[\s\S]*?<\/div>/.exec(both)?.[0] ?? ''
    expect(alert).toContain('<strong>The cloudflare transport&#39;s circuit is open</strong>')
    expect(alert).toContain(`${OPEN_REASON}; ${waiting} notification(s) wait, none is lost.`)
    expect(both).toContain('<div class="error" role="alert" data-transport="resend">')
    const overview = await pageAs(VIEWER_TOKEN, '/console', failover)
    const open = transportRow(overview, 'cloudflare')
    expect(open).toContain('data-state="circuit-open"')
    expect(open).toContain('circuit open')
    expect(open).toContain(OPEN_REASON)
    expect(open).not.toContain('<code>circuit-open</code>')
    expect(open).toContain(`<a href="/console/notifications?status=paused">${waiting} waiting</a>`)
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
