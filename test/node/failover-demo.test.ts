/**
 * The demo's provider failover against `wrangler dev` with EMAIL_TRANSPORTS =
 * resend,cloudflare, the stand-in for Resend posting its signed webhooks
 * back, and the bridge's RabbitMQ source (the demo's invitations come that
 * way): mail through resend, through the local send_email binding while the
 * stand-in refuses the key, and through resend again after the probe. And the
 * stand-in's faults, answered as Resend documents them.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { after, before, test } from 'node:test'
import { promisify } from 'node:util'
import { Connection } from 'rabbitmq-client'
import { failoverRight, type StandInFault, showFailover } from '../../scripts/demo-failover.ts'
import type { Endpoints } from '../../scripts/demo-lib.ts'
import { startBridge } from '../../support/bridge-process.ts'
import { assertNoLeaks } from '../../support/child-output.ts'
import { type LocalWorker, startLocalWorker } from '../../support/local-worker.ts'
import { startProviderFake } from '../../support/provider-fake.ts'
import { waitFor } from '../../support/wait.ts'

const run = promisify(execFile)
const id = crypto.randomUUID().slice(0, 8)
const ADMIN = 'failover-demo-admin-token-0123456789'
const INGEST = 'failover-demo-ingest-token-0123456789'
const API_KEY = 're_failover_demo'
const WEBHOOK_SECRET = 'whsec_ZmFpbG92ZXItZGVtby13ZWJob29rLXNlY3JldA=='
const rabbitUrl = process.env.TEST_RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const exchange = `failover.notifications.${id}`
const queue = `failover.email.${id}`

let provider: Awaited<ReturnType<typeof startProviderFake>>
let worker: LocalWorker | undefined
let bridge: Awaited<ReturnType<typeof startBridge>> | undefined

before(async () => {
  await run('bash', ['scripts/services-up.sh'])
  provider = await startProviderFake({ failureRate: 0, apiKey: API_KEY })
})

after(async () => {
  await bridge?.stop()
  await worker?.stop()
  provider?.close()
  const rabbit = new Connection({ url: rabbitUrl, connectionName: 'failover-demo-cleanup' })
  await rabbit.queueDelete({ queue }).catch(() => {})
  await rabbit.exchangeDelete({ exchange }).catch(() => {})
  await rabbit.close()
  assertNoLeaks()
})

/** A request the stand-in would take: Resend's `POST /emails`, with its key and a User-Agent. */
function post(key: string) {
  return fetch(`${provider.url}/emails`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${API_KEY}`,
      'content-type': 'application/json',
      'user-agent': 'failover-demo-test',
      'idempotency-key': key,
    },
    body: JSON.stringify({ from: 'Demo <demo@example.com>', to: ['someone@example.com'], subject: 's', text: 't' }),
  })
}

test("the stand-in's faults, as Resend's error reference names them; a key it took is still answered while the quota is used up", async () => {
  const taken = await post('taken-before')
  assert.equal(taken.status, 200)
  const first = await taken.json()

  provider.setQuotaExceeded(true)
  const quota = await post('new-during-quota')
  assert.equal(quota.status, 429)
  assert.equal((await quota.json()).name, 'daily_quota_exceeded')
  // No retry-after: the page names none for a quota (the rate headers come with every answer).
  assert.equal(quota.headers.get('retry-after'), null)
  assert.ok(quota.headers.get('ratelimit-limit'))
  const repeat = await post('taken-before')
  assert.equal(repeat.status, 200, 'a repeat of a key already taken sends nothing new: its first answer')
  assert.deepEqual(await repeat.json(), first)
  provider.setQuotaExceeded(false)

  provider.setOutage(true)
  const down = await post('new-during-outage')
  assert.equal(down.status, 500)
  assert.equal((await down.json()).name, 'internal_server_error')
  provider.setOutage(false)
  const back = await post('new-during-outage')
  assert.equal(back.status, 200, 'nothing was taken while it was down: the key is free')

  assert.equal(provider.stats.refusedForQuota, 1)
  assert.equal(provider.stats.outageFailures, 1)
})

test('the demo step: resend, the binding while the key is refused, the probe and the next through resend', async () => {
  worker = await startLocalWorker({
    ADMIN_TOKEN: ADMIN,
    INGEST_TOKEN: INGEST,
    EMAIL_TRANSPORT: 'resend',
    EMAIL_TRANSPORTS: 'resend,cloudflare',
    RESEND_API_KEY: API_KEY,
    RESEND_API_URL: provider.url,
    RESEND_WEBHOOK_SECRET: WEBHOOK_SECRET,
  })
  provider.setWebhook({ url: `${worker.url}/v1/webhooks/resend`, secret: WEBHOOK_SECRET })
  bridge = await startBridge({
    SINK_URL: `${worker.url}/v1/ingest`,
    SINK_TOKEN: INGEST,
    RABBITMQ_URL: rabbitUrl,
    RABBITMQ_DECLARE: 'true',
    RABBITMQ_EXCHANGE: exchange,
    RABBITMQ_QUEUE: queue,
  })
  const port = bridge.port
  await waitFor(
    async () => ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok ? true : undefined),
    'the bridge',
    90_000,
  )
  const endpoints: Endpoints = {
    workerUrl: worker.url,
    adminToken: ADMIN,
    pgUrl: '',
    rabbitUrl,
    exchange,
    kafkaBrokers: [],
  }
  let fault: StandInFault = 'none'
  const standIn = {
    state: async () => ({ transports: ['resend', 'cloudflare'], fault, accepted: provider.emails.size }),
    async setFault(next: StandInFault) {
      fault = next
      provider.setKeyRevoked(next === 'key-revoked')
    },
  }

  const shown = await showFailover(endpoints, standIn, { timeoutMs: 60_000 })
  assert.ok(failoverRight(shown), JSON.stringify(shown, null, 2))
  const [before, refused] = shown.rows
  assert.equal(before?.transport, 'resend')
  assert.equal(refused?.transport, 'cloudflare')
  // Tried through resend, refused for the key (not counted), then sent through the binding.
  assert.equal(refused?.sendAttempts, 1)
  assert.match(shown.pausedAfterRefusal.gauge ?? '', /transport="resend".*\b1$|code="invalid_api_key".*\b1$/)
  assert.ok(shown.byProvider.cloudflare >= 1)
  assert.ok(shown.byProvider.resend >= 3)
  assert.equal(fault, 'none', 'the step leaves the stand-in without a fault')
})
