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
import type { Finding } from '../src/health/findings.ts'
import { isPlaceholderDomain, isPlaceholderHost } from '../src/health/placeholders.ts'
import worker from '../src/index.ts'
import { FAKE_RESEND_DOMAINS, FAKE_RESEND_KEYS, FAKE_RESEND_URL } from './fake-resend.ts'
import { ADMIN_TOKEN, INGEST_TOKEN, runCron } from './helpers.ts'
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

describe("the console's overview", () => {
  async function overviewAs(token: string) {
    const vars = { VIEWER_TOKEN }
    const signIn = await worker.fetch(
      new Request('http://worker/console/sign-in', {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
        body: new URLSearchParams({ token }).toString(),
      }),
      { ...env, ...vars } as Env,
      createExecutionContext(),
    )
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
    const page = await worker.fetch(
      new Request('http://worker/console', { headers: { cookie } }),
      { ...env, ...vars } as Env,
      createExecutionContext(),
    )
    expect(page.status).toBe(200)
    return page.text()
  }

  it("shows an admin the doctor's blockers and warnings with their fixes at the top", async () => {
    const html = await overviewAs(ADMIN_TOKEN)
    const panel = /<section id="findings"[\s\S]*?<\/section>/.exec(html)?.[0] ?? ''
    expect(panel).toContain('data-finding="sender-placeholder"')
    expect(panel).toContain('data-finding="public-url-placeholder"')
    expect(panel).toContain('EMAIL_FROM in wrangler.toml')
    // Notes stay in the doctor's full list.
    expect(panel).not.toContain('data-finding="delivery-events-subscription"')
    expect(html.indexOf('id="findings"')).toBeLessThan(html.indexOf('id="transport-state"'))
  })

  it('shows a viewer no findings: the route is an admin’s', async () => {
    const html = await overviewAs(VIEWER_TOKEN)
    expect(html).toContain('id="transport-state"')
    expect(html).not.toContain('id="findings"')
  })
})
