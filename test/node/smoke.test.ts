/**
 * `notify-edge smoke` end to end against `wrangler dev`: with the send_email
 * binding it follows the event through `sent` and says that the local binding
 * reports no deliveries; with the resend transport, through the stand-in for
 * Resend that posts its signed webhooks back, through `delivered`.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { after, test } from 'node:test'
import { promisify } from 'node:util'
import { assertNoLeaks, watchOutput } from '../../support/child-output.ts'
import { type LocalWorker, startLocalWorker } from '../../support/local-worker.ts'
import { startProviderFake } from '../../support/provider-fake.ts'

const run = promisify(execFile)
const ADMIN = 'smoke-test-admin-token-0123456789'
const INGEST = 'smoke-test-ingest-token-0123456789'
const WEBHOOK_SECRET = 'whsec_c21va2UtdGVzdC13ZWJob29rLXNlY3JldA=='
const workers: LocalWorker[] = []

let printed = ''
watchOutput('the CLI', () => printed)

type Report = { eventId: string; hops: { hop: string; at: string; detail: string }[]; stalled?: { hop: string } }

async function smoke(worker: LocalWorker, ...args: string[]): Promise<{ code: number; stdout: string }> {
  const result = await run(process.execPath, ['bin/notify-edge.ts', 'smoke', ...args], {
    env: { ...process.env, NOTIFY_EDGE_URL: worker.url, NOTIFY_EDGE_TOKEN: ADMIN, NOTIFY_EDGE_INGEST_TOKEN: INGEST },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  )
  printed += result.stdout + result.stderr
  return { code: result.code, stdout: result.stdout }
}

/** A Worker with the resend transport, to a stand-in for Resend that posts its signed webhooks back to it. */
async function resendWorker() {
  const provider = await startProviderFake({ failureRate: 0, apiKey: 're_smoke_test' })
  after(() => provider.close())
  const worker = await startLocalWorker({
    ADMIN_TOKEN: ADMIN,
    INGEST_TOKEN: INGEST,
    EMAIL_TRANSPORT: 'resend',
    RESEND_API_KEY: 're_smoke_test',
    RESEND_API_URL: provider.url,
    RESEND_WEBHOOK_SECRET: WEBHOOK_SECRET,
  })
  workers.push(worker)
  provider.setWebhook({ url: `${worker.url}/v1/webhooks/resend`, secret: WEBHOOK_SECRET })
  return { provider, worker }
}

after(async () => {
  for (const worker of workers) await worker.stop()
  assertNoLeaks()
})

test('with the send_email binding: every hop through sent, and it says deliveries are not reported locally', async () => {
  const worker = await startLocalWorker({ ADMIN_TOKEN: ADMIN, INGEST_TOKEN: INGEST })
  workers.push(worker)
  const human = await smoke(worker, '--to', 'someone@example.com')
  assert.equal(human.code, 0, human.stdout)
  assert.match(human.stdout, /✓ sent .* through cloudflare/)
  assert.match(human.stdout, /delivered +not reported here: the local send_email binding/)

  const { code, stdout } = await smoke(worker, '--to', 'someone@example.com', '--json')
  assert.equal(code, 0)
  const report = JSON.parse(stdout) as Report
  assert.deepEqual(
    report.hops.map((hop) => hop.hop),
    ['accepted', 'materialized', 'claimed', 'sent'],
  )
  // Each hop's time is the Worker's own record, in order.
  const times = report.hops.map((hop) => Date.parse(hop.at))
  assert.deepEqual(
    times,
    [...times].sort((a, b) => a - b),
  )
  const story = await worker.api('GET', `/v1/events/${report.eventId}`, ADMIN)
  const [notification] = story.body.notifications as { status: string; sendAttempts: number }[]
  assert.equal(notification?.status, 'sent')
  assert.equal(notification?.sendAttempts, 1)
})

test('with the resend transport: through delivered, from the signed webhook the stand-in posts back', async () => {
  const { provider, worker } = await resendWorker()
  const { code, stdout } = await smoke(worker, '--to', 'someone@example.com', '--json')
  assert.equal(code, 0, stdout)
  const report = JSON.parse(stdout) as Report
  assert.deepEqual(
    report.hops.map((hop) => hop.hop),
    ['accepted', 'materialized', 'claimed', 'sent', 'delivered'],
  )
  assert.match(report.hops[3]?.detail ?? '', /through resend, provider id fake_ntf_/)
  assert.deepEqual(
    [...provider.emails.values()].map((email) => email.to),
    ['someone@example.com'],
  )
  assert.equal(provider.stats.contractViolations, 0)
})

test('a stall names its hop and the configuration finding that explains it: a revoked key pauses the transport', async () => {
  const { provider, worker } = await resendWorker()
  provider.setKeyRevoked(true)
  const human = await smoke(worker, '--to', 'someone@example.com')
  assert.equal(human.code, 1, human.stdout)
  assert.match(human.stdout, /✓ claimed/)
  assert.match(human.stdout, /✗ sent +stalled: the notification is paused: /)
  assert.match(human.stdout, /blocker: .*paused/i)
  assert.match(human.stdout, /fix: .*wrangler secret put RESEND_API_KEY/)
  assert.equal(provider.emails.size, 0)
})
