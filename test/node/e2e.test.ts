// biome-ignore-all lint/performance/useDomNodeTextContent: these are Playwright's Locator#innerText (the text as rendered), not the DOM property
/**
 * End to end on this machine: a real `wrangler dev` (local D1, KV, Queues,
 * email), the bridge as its own process, and the real PostgreSQL, RabbitMQ and
 * Kafka — each sample through its natural source, one poison event per
 * source, and a replay after the cause of a dead letter is fixed.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { after, before, test } from 'node:test'
import { promisify } from 'node:util'
import { Kafka, logLevel, Partitioners } from 'kafkajs'
import { chromium } from 'playwright-core'
import postgres from 'postgres'
import { Connection } from 'rabbitmq-client'
import { migratePostgres } from '../../bridge/src/migrate.ts'
import { showDigest } from '../../scripts/demo-digest.ts'
import { collectOutcomes, type Endpoints, sendSamples } from '../../scripts/demo-lib.ts'
import { showRecipientLoop } from '../../scripts/demo-recipients.ts'
import { startBridge } from '../../support/bridge-process.ts'
import { assertNoLeaks } from '../../support/child-output.ts'
import { type LocalWorker, startLocalWorker } from '../../support/local-worker.ts'
import { waitFor } from '../../support/wait.ts'

const run = promisify(execFile)
const id = crypto.randomUUID().slice(0, 8)
const ADMIN = 'e2e-admin-token-0123456789'
const INGEST = 'e2e-ingest-token-0123456789'
const PG_ADMIN = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const DATABASE = `notify_edge_e2e_${id}`
const PG_URL = PG_ADMIN.replace(/\/[^/]*$/, `/${DATABASE}`)
const endpoints: Endpoints = {
  workerUrl: '',
  adminToken: ADMIN,
  pgUrl: PG_URL,
  rabbitUrl: process.env.TEST_RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  exchange: `e2e.notifications.${id}`,
  kafkaBrokers: (process.env.TEST_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
  topics: { requests: `e2e.${id}.requests`, persons: `e2e.${id}.persons`, contacts: `e2e.${id}.contacts` },
}
let worker: LocalWorker
let bridge: Awaited<ReturnType<typeof startBridge>>
let WORKER = ''

const until = <T>(check: () => Promise<T | undefined>, what: string) => waitFor(check, what, 90_000)

const api = (method: string, path: string, body?: unknown) => worker.api(method, path, ADMIN, body)

async function mails(): Promise<{ to: string[]; subject: string }[]> {
  const response = await fetch(`${WORKER}/cdn-cgi/local/explorer/api/local/email/sending?per_page=100`)
  return ((await response.json()) as { result: { to: string[]; subject: string }[] }).result
}

before(async () => {
  await run('bash', ['scripts/services-up.sh'])
  const admin = postgres(PG_ADMIN, { max: 1, onnotice: () => {} })
  await admin.unsafe(`CREATE DATABASE ${DATABASE}`)
  await admin.end({ timeout: 1 })
  await migratePostgres(PG_URL)
  const kafka = new Kafka({ clientId: 'e2e', brokers: endpoints.kafkaBrokers, logLevel: logLevel.NOTHING })
  const kafkaAdmin = kafka.admin()
  await kafkaAdmin.connect()
  const topics = endpoints.topics as NonNullable<Endpoints['topics']>
  await kafkaAdmin.createTopics({
    topics: Object.values(topics).map((topic) => ({ topic, numPartitions: 3 })),
    waitForLeaders: true,
  })
  await kafkaAdmin.disconnect()

  // DEFAULT_LOCALE is kk: see the replay test.
  worker = await startLocalWorker({ ADMIN_TOKEN: ADMIN, INGEST_TOKEN: INGEST, DEFAULT_LOCALE: 'kk' })
  WORKER = worker.url
  endpoints.workerUrl = WORKER
  bridge = await startBridge({
    SINK_URL: `${WORKER}/v1/ingest`,
    SINK_TOKEN: INGEST,
    PG_URL,
    RABBITMQ_URL: endpoints.rabbitUrl,
    RABBITMQ_DECLARE: 'true',
    RABBITMQ_EXCHANGE: endpoints.exchange as string,
    RABBITMQ_QUEUE: `e2e.email.${id}`,
    KAFKA_BROKERS: endpoints.kafkaBrokers.join(','),
    KAFKA_TOPICS: Object.values(topics).join(','),
    KAFKA_GROUP_ID: `e2e-${id}`,
  })
  await until(async () => ((await fetch(`http://127.0.0.1:${bridge.port}/readyz`)).ok ? true : undefined), 'the bridge')
})

after(async () => {
  await bridge?.stop()
  await worker?.stop()
  const rabbit = new Connection({ url: endpoints.rabbitUrl, connectionName: 'e2e-cleanup' })
  await rabbit.queueDelete({ queue: `e2e.email.${id}` }).catch(() => {})
  await rabbit.exchangeDelete({ exchange: endpoints.exchange as string }).catch(() => {})
  await rabbit.close()
  const kafkaAdmin = new Kafka({
    clientId: 'e2e-cleanup',
    brokers: endpoints.kafkaBrokers,
    logLevel: logLevel.NOTHING,
  }).admin()
  await kafkaAdmin.connect()
  await kafkaAdmin.deleteTopics({ topics: Object.values(endpoints.topics ?? {}) }).catch(() => {})
  await kafkaAdmin.disconnect()
  const admin = postgres(PG_ADMIN, { max: 1, onnotice: () => {} })
  await admin.unsafe(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`)
  await admin.end({ timeout: 1 })
})

test('each source: the sample reaches the email list with its recipient and subject; the poison event is a dead letter in the API', async () => {
  // DEFAULT_LOCALE is kk here (see the replay test): recipients without a contact would have no template.
  assert.equal(
    (
      await api('PUT', '/v1/contacts/9f4e8b7a-2c9f-4f1e-b5c3-6d2e1f0a8b77', {
        email: 'mikhail.designer@example.com',
        locale: 'ru-RU',
      })
    ).status,
    200,
  )
  const sent = await sendSamples(endpoints)
  const outcomes = await collectOutcomes(endpoints, sent)
  const expected: Record<string, { to: string; subject: string }> = {
    'response.created': { to: 'anna.client@example.com', subject: 'Новый отклик на ваш проект' },
    'invitation.created': { to: 'mikhail.designer@example.com', subject: 'Вас пригласили в проект' },
    'verification-request-submitted': { to: 'reviewer@example.com', subject: 'Новая заявка на верификацию' },
    'verification-completed (rejected)': { to: 'anna.client@example.com', subject: 'Верификация отклонена' },
    'verification-completed (approved)': { to: 'anna.client@example.com', subject: 'Верификация пройдена' },
  }
  const list = await mails()
  for (const row of outcomes) {
    const want = expected[row.label]
    if (want) {
      assert.equal(row.notificationStatus, 'sent', row.label)
      assert.deepEqual({ to: row.to, subject: row.subject }, want, row.label)
      assert.ok(
        list.some((mail) => mail.to.includes(want.to) && mail.subject === want.subject),
        `${row.label} not in the email list`,
      )
    } else if (row.expect === 'dead-letter') {
      assert.equal(row.outcome, 'dead-lettered', row.label)
      assert.equal(row.code, 'NTF_INVALID_PAYLOAD', row.label)
    } else {
      assert.equal(row.outcome, 'ignored-event', row.label)
    }
  }
  for (const source of ['postgres', 'rabbitmq', 'kafka']) {
    const { body } = await api('GET', `/v1/dead-letters?source=${source}&code=NTF_INVALID_PAYLOAD`)
    assert.ok((body.items as unknown[]).length >= 1, `no dead letter from ${source}`)
  }
})

test('a dead letter whose cause is fixed (a missing template) is replayed and the email is sent', async () => {
  const owner = crypto.randomUUID()
  assert.equal(
    (await api('PUT', `/v1/contacts/${owner}`, { email: 'kazakh.owner@example.com', locale: 'kk' })).status,
    200,
  )
  const messageId = crypto.randomUUID()
  const kafka = new Kafka({ clientId: 'e2e-replay', brokers: endpoints.kafkaBrokers, logLevel: logLevel.NOTHING })
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
  await producer.connect()
  await producer.send({
    topic: endpoints.topics?.requests as string,
    messages: [
      {
        key: owner,
        headers: { 'message-id': messageId, 'event-type': 'verification-completed', 'contract-version': '1' },
        value: JSON.stringify({
          RequestId: crypto.randomUUID(),
          PersonId: crypto.randomUUID(),
          UserId: owner,
          Decision: 'approved',
        }),
      },
    ],
  })
  await producer.disconnect()
  const dead = await until(async () => {
    const { status, body } = await api('GET', `/v1/events/${messageId}`)
    const letters = status === 200 ? (body.deadLetters as { id: string; code: string }[]) : []
    return letters.length > 0 ? letters[0] : undefined
  }, 'the dead letter')
  assert.equal(dead.code, 'NTF_TEMPLATE_NOT_RESOLVED')
  const saved = await api('PUT', '/v1/templates/VerificationApproved/kk/email', {
    subject: 'Верификация өтті',
    textBody: 'Сәлем!',
    htmlBody: '<p>Сәлем!</p>',
  })
  assert.equal(saved.status, 200)
  assert.equal((await api('POST', `/v1/dead-letters/${dead.id}/replay`)).status, 200)
  await until(
    async () =>
      (await mails()).some(
        (mail) => mail.to.includes('kazakh.owner@example.com') && mail.subject === 'Верификация өтті',
      )
        ? true
        : undefined,
    'the email after the replay',
  )
})

// Nothing the child processes of this file printed may carry personal data.
after(() => assertNoLeaks())

test('the recipient loop through the real sources: a bounce suppresses the next email, an unsubscribe opts out of the next optional one', async () => {
  // The Worker's test secret (support/local-worker.ts): the webhook is signed as Resend signs it.
  const loop = await showRecipientLoop(endpoints, 'whsec_dGVzdC1yZXNlbmQtd2ViaG9vay1zZWNyZXQ=')
  for (const step of loop.steps) assert.equal(step.got, step.expected, step.step)
  // One email each, the first: the follow-ups were recorded, not sent.
  const list = await mails()
  assert.equal(list.filter((mail) => mail.to.includes(loop.bounced)).length, 1)
  assert.equal(list.filter((mail) => mail.to.includes(loop.optedOut)).length, 1)
})

test('five responses to one project through the outbox become one email that lists all five', async () => {
  const shown = await showDigest(endpoints)
  assert.deepEqual(
    shown.events.map((event) => event.status),
    Array(5).fill('digested'),
  )
  assert.equal(new Set(shown.events.map((event) => event.digestId)).size, 1)
  assert.equal(shown.digest?.status, 'sent')
  assert.equal(shown.digest?.size, 5)
  assert.equal(shown.digest?.listed, 5)
  assert.match(shown.digest?.subject ?? '', /^5 новых откликов на ваш проект «Редизайн лендинга для студии керамики»$/)
  // One email to the owner, naming every response.
  const list = (await mails()).filter((mail) => mail.to.includes(shown.owner.email))
  assert.equal(list.length, 1)
})

test('after the demo, the overview charts what it did; its screenshot is the one docs/operating.md shows', async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox'],
  })
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Europe/Moscow' })
    context.setDefaultTimeout(30_000)
    const page = await context.newPage()
    await page.goto(`${WORKER}/console/sign-in`)
    await page.getByLabel('Token (admin or viewer)').fill(ADMIN)
    await page.keyboard.press('Enter')
    await page.waitForURL(`${WORKER}/console`)
    const hour = page.getByRole('region', { name: 'The last hour, per minute' })
    // The samples, the poison events, the loop's and the digest's events: counted, charted, rated.
    for (const name of [
      'Events accepted, events per minute',
      'Sent, emails per minute',
      'Suppressed, notifications per minute',
      'Opted out, notifications per minute',
      'Dead-lettered, messages per minute',
    ]) {
      assert.match((await hour.getByRole('img', { name }).getAttribute('data-total')) ?? '', /^[1-9]\d*$/, name)
    }
    const day = page.getByRole('region', { name: 'Rates by kind, last 24 hours' })
    assert.match(await day.locator('tbody tr').first().innerText(), /^All kinds\s+[1-9]/)
    // The digest's five responses among the notifications that ended digested.
    const ended = await page.getByRole('region', { name: 'Notifications by final status, last 24 hours' }).innerText()
    assert.ok(Number(/digested\s+(\d+)/.exec(ended)?.[1]) >= 5, ended)
    mkdirSync('test-output/console', { recursive: true })
    await page.screenshot({ path: 'test-output/console/overview-after-demo-1280.png', fullPage: true })
    // Down to the last hour's charts: the picture docs/operating.md shows (docs/images/console-overview.png).
    const box = await hour.boundingBox()
    assert.ok(box)
    await page.screenshot({
      path: 'test-output/console/overview-after-demo-top-1280.png',
      fullPage: true,
      clip: { x: 0, y: 0, width: 1280, height: Math.ceil(box.y + box.height + 16) },
    })
  } finally {
    await browser.close()
  }
})
