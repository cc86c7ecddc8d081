/**
 * `npm run chaos` (CHAOS_EVENTS, default 3,000): events over the three sources,
 * valid and poison mixed, while the harness SIGKILLs and restarts the bridge
 * three times, terminates its PostgreSQL connections, force-closes its
 * RabbitMQ connections, restarts the Kafka broker, makes the Worker's ingest
 * answer 503 in bursts (a fault proxy here, between bridge and Worker), and
 * fails 30 % of email sends transiently (a fake provider here, behind the
 * `resend` transport). Then it reconciles, prints a table, writes
 * chaos-results.json, and exits non-zero when an event was lost, an email
 * repeated, or a valid event was dead-lettered.
 */
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { Kafka, logLevel, Partitioners } from 'kafkajs'
import postgres from 'postgres'
import { Connection } from 'rabbitmq-client'
import { renderTable } from '../bin/table.ts'
import { migratePostgres } from '../bridge/src/migrate.ts'
import { startBridge, waitFor } from '../bridge/test/helpers.ts'
import { startLocalWorker } from './local-worker.ts'

const EVENTS = Number(process.env.CHAOS_EVENTS ?? '3000')
const POISON_EVERY = 10
const id = crypto.randomUUID().slice(0, 8)
const progress = (text: string) => process.stdout.write(`[chaos] ${text}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function listen(handler: (request: IncomingMessage, response: ServerResponse) => void) {
  const server = createServer(handler)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { server, port: (server.address() as AddressInfo).port }
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

// ── the fake email provider (Resend's API shape), 30 % transient failures ────
const accepted = new Map<string, { to: string; count: number }>() // by Idempotency-Key, as Resend dedupes
let providerAttempts = 0
let providerFailures = 0
const provider = await listen(async (request, response) => {
  const body = JSON.parse((await readBody(request)).toString()) as { to: string[] }
  const key = request.headers['idempotency-key'] as string
  providerAttempts += 1
  if (Math.random() < 0.3) {
    providerFailures += 1
    response.writeHead(503).end('{"message":"try again"}')
    return
  }
  const seen = accepted.get(key)
  if (seen) seen.count += 1
  else accepted.set(key, { to: body.to[0] as string, count: 1 })
  response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `fake_${key}` }))
})

// ── the Worker under wrangler dev, with the resend transport pointed at the fake ──
const ADMIN = 'chaos-admin-token-0123456789'
const INGEST = 'chaos-ingest-token-0123456789'
execFileSync('bash', ['scripts/services-up.sh'], { stdio: 'ignore' })
const worker = await startLocalWorker({
  ADMIN_TOKEN: ADMIN,
  INGEST_TOKEN: INGEST,
  EMAIL_TRANSPORT: 'resend',
  RESEND_API_KEY: 'chaos',
  RESEND_API_URL: `http://127.0.0.1:${provider.port}`,
  // Nine quick retries: the 30 % failure rate is the point, not the waiting.
  DISPATCH_RETRY_DELAYS_SECONDS: '1,1,1,2,2,2,3,3,3',
})
const WORKER = worker.url

// ── the fault proxy between bridge and Worker: 503 in bursts ──────────────────
let proxied = 0
let refused = 0
const proxy = await listen(async (request, response) => {
  const body = await readBody(request)
  proxied += 1
  if (proxied % 50 >= 40) {
    refused += 1
    response
      .writeHead(503, { 'content-type': 'application/json' })
      .end('{"error":{"code":"QUEUE_UNAVAILABLE","message":"chaos"}}')
    return
  }
  const upstream = await fetch(`${WORKER}${request.url}`, {
    method: request.method,
    headers: { authorization: request.headers.authorization ?? '', 'content-type': 'application/json' },
    body: body.toString('utf8'),
  })
  response.writeHead(upstream.status, { 'content-type': 'application/json' }).end(await upstream.text())
})

// ── the sources ──────────────────────────────────────────────────────────────
const pgAdmin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => {} })
const database = `notify_edge_chaos_${id}`
await pgAdmin.unsafe(`CREATE DATABASE ${database}`)
const pgUrl = `postgres://postgres@127.0.0.1:5432/${database}`
await migratePostgres(pgUrl)
const sql = postgres(pgUrl, { max: 2, onnotice: () => {} })
const rabbit = new Connection({ url: 'amqp://guest:guest@127.0.0.1:5672', connectionName: 'chaos-publisher' })
const exchange = `chaos.notifications.${id}`
const queue = `chaos.email.${id}`
const topic = `chaos.pin.${id}`
const kafka = new Kafka({
  clientId: 'chaos',
  brokers: ['127.0.0.1:9092'],
  logLevel: logLevel.NOTHING,
  retry: { retries: 30 },
})
const admin = kafka.admin()
await admin.connect()
await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true })
const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, retry: { retries: 30 } })
await producer.connect()

const bridgeEnv = {
  SINK_URL: `http://127.0.0.1:${proxy.port}/v1/ingest`,
  SINK_TOKEN: INGEST,
  PG_URL: pgUrl,
  RABBITMQ_URL: 'amqp://guest:guest@127.0.0.1:5672',
  RABBITMQ_DECLARE: 'true',
  RABBITMQ_EXCHANGE: exchange,
  RABBITMQ_QUEUE: queue,
  KAFKA_BROKERS: '127.0.0.1:9092',
  KAFKA_TOPICS: topic,
  KAFKA_GROUP_ID: `chaos-${id}`,
  LOG_LEVEL: 'warn',
}
let bridge = await startBridge(bridgeEnv)
await bridge.ready()

// ── the events: ArtHunt bodies over all three sources (any source can carry any contract) ──
const sample = JSON.parse(readFileSync('examples/arthunt/response.created.json', 'utf8'))
type Planned = { eventId: string; source: 'postgres' | 'rabbitmq' | 'kafka'; valid: boolean }
const planned: Planned[] = []
const publisher = rabbit.createPublisher({ confirm: true, maxAttempts: 20 })
async function send(index: number) {
  const eventId = crypto.randomUUID()
  const valid = index % POISON_EVERY !== 0
  const body = structuredClone(sample)
  body.envelope.eventId = eventId
  body.data.recipient.email = `chaos+${eventId}@example.com`
  if (!valid) delete body.data.recipient.email
  const bytes = Buffer.from(JSON.stringify(body))
  const source = (['postgres', 'rabbitmq', 'kafka'] as const)[index % 3] as Planned['source']
  planned.push({ eventId, source, valid })
  for (let attempt = 0; ; attempt += 1) {
    try {
      if (source === 'postgres') {
        await sql.begin(async (tx) => {
          await tx`INSERT INTO data_exchange.message_queue_log (message_id) VALUES (${eventId})`
          await tx`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body) VALUES (${eventId}, ${bytes})`
        })
      } else if (source === 'rabbitmq') {
        await publisher.send(
          { exchange, routingKey: 'notifications.email.response.created', messageId: eventId, durable: true },
          bytes,
        )
      } else {
        await producer.send({ topic, messages: [{ key: eventId, value: bytes, headers: { 'message-id': eventId } }] })
      }
      return
    } catch (error) {
      // The harness's own producers ride out the faults too; a send that failed is sent again.
      if (attempt > 50) throw error
      await sleep(500)
    }
  }
}

// ── faults, spread over the sending ──────────────────────────────────────────
const faults: string[] = []
const kafkaHome = join(process.env.NOTIFY_EDGE_CACHE ?? join(homedir(), '.cache', 'notify-edge'))
const fault = async (name: string, act: () => Promise<void> | void) => {
  faults.push(name)
  progress(`fault: ${name}`)
  await act()
}
async function restartBridge(): Promise<void> {
  await bridge.kill()
  bridge = await startBridge(bridgeEnv)
}
const schedule: [number, string, () => Promise<void> | void][] = [
  [0.1, 'SIGKILL the bridge, restart it', restartBridge],
  [
    0.25,
    'terminate the bridge PostgreSQL connections',
    async () => {
      await pgAdmin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${database} AND application_name = 'notify-edge-bridge'`
    },
  ],
  [
    0.4,
    'force-close the bridge RabbitMQ connections',
    () => {
      const lines = execFileSync('rabbitmqctl', ['-q', 'list_connections', 'pid', 'client_properties'], {
        encoding: 'utf8',
      }).split('\n')
      for (const line of lines.filter((l) => l.includes('notify-edge-bridge'))) {
        execFileSync('rabbitmqctl', ['-q', 'close_connection', line.trim().split(/\s+/)[0] as string, 'chaos'])
      }
    },
  ],
  [0.5, 'SIGKILL the bridge, restart it', restartBridge],
  [
    0.6,
    'restart the Kafka broker',
    async () => {
      const pidFile = join(kafkaHome, 'started', 'kafka.pid')
      let pid: number | undefined
      try {
        pid = Number(readFileSync(pidFile, 'utf8'))
      } catch {
        pid = undefined
      }
      if (!pid) {
        progress('  (Kafka was not started by services:up; not restarting it)')
        return
      }
      process.kill(pid, 'SIGTERM')
      await waitFor(
        () => {
          try {
            process.kill(pid as number, 0)
            return undefined
          } catch {
            return true
          }
        },
        'the broker to stop',
        60_000,
      )
      execFileSync('bash', ['scripts/services-up.sh'], { stdio: 'ignore' })
    },
  ],
  [0.8, 'SIGKILL the bridge, restart it', restartBridge],
]
progress(`sending ${EVENTS} events (1 in ${POISON_EVERY} poison) over PostgreSQL, RabbitMQ and Kafka`)
const started = Date.now()
let next = 0
for (let index = 0; index < EVENTS; index += 1) {
  while (next < schedule.length && index >= (schedule[next]?.[0] ?? 1) * EVENTS) {
    const [, name, act] = schedule[next] as (typeof schedule)[number]
    await fault(name, act)
    next += 1
  }
  await send(index)
  if (index % 500 === 499) progress(`  sent ${index + 1}`)
}

// ── reconcile ────────────────────────────────────────────────────────────────
const valid = planned.filter((event) => event.valid)
const addresses = new Map(valid.map((event) => [`chaos+${event.eventId}@example.com`, event.eventId]))
const emailsFor = () => {
  const perEvent = new Map<string, number>()
  for (const { to } of accepted.values()) {
    const eventId = addresses.get(to)
    if (eventId) perEvent.set(eventId, (perEvent.get(eventId) ?? 0) + 1)
  }
  return perEvent
}
progress('waiting for every valid event to be emailed…')
const deadline = Date.now() + Number(process.env.CHAOS_TIMEOUT_MS ?? 600_000)
let lastReport = 0
while (Date.now() < deadline && emailsFor().size < valid.length) {
  await sleep(1000)
  if (Date.now() - lastReport > 10_000) {
    lastReport = Date.now()
    const have = emailsFor()
    const missing = valid.filter((event) => !have.has(event.eventId))
    const bySource = Object.fromEntries(
      ['postgres', 'rabbitmq', 'kafka'].map((source) => [source, missing.filter((e) => e.source === source).length]),
    )
    progress(`  ${have.size}/${valid.length} emailed; missing by source ${JSON.stringify(bySource)}`)
  }
}
const perEvent = emailsFor()
const lost = valid.filter((event) => !perEvent.has(event.eventId))
const duplicates = [...perEvent.values()].reduce((sum, count) => sum + Math.max(0, count - 1), 0)
const deadLetters: { eventId: string | null; code: string }[] = []
let cursor: string | null = null
do {
  const page = (await (
    await fetch(`${WORKER}/v1/dead-letters?limit=500${cursor ? `&cursor=${cursor}` : ''}`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    })
  ).json()) as {
    items: { eventId: string | null; code: string }[]
    nextCursor: string | null
  }
  deadLetters.push(...page.items)
  cursor = page.nextCursor
} while (cursor)
const validIds = new Set(valid.map((event) => event.eventId))
const validDeadLettered = deadLetters.filter((letter) => letter.eventId && validIds.has(letter.eventId))
const byCode: Record<string, number> = {}
for (const letter of deadLetters) byCode[letter.code] = (byCode[letter.code] ?? 0) + 1

const result = {
  ran_at: new Date().toISOString(),
  seconds: Math.round((Date.now() - started) / 1000),
  events_sent: planned.length,
  events_by_source: Object.fromEntries(
    ['postgres', 'rabbitmq', 'kafka'].map((source) => [source, planned.filter((e) => e.source === source).length]),
  ),
  poison_sent: planned.length - valid.length,
  emails_expected: valid.length,
  emails_sent: perEvent.size,
  lost: lost.length,
  duplicates,
  valid_dead_lettered: validDeadLettered.length,
  dead_letters_by_code: byCode,
  faults,
  ingest_503_bursts_answered: refused,
  provider_attempts: providerAttempts,
  provider_transient_failures: providerFailures,
  provider_repeats_deduplicated_by_idempotency_key: [...accepted.values()].reduce(
    (sum, entry) => sum + entry.count - 1,
    0,
  ),
}
writeFileSync('chaos-results.json', `${JSON.stringify(result, null, 2)}\n`)
console.log(
  `\n${renderTable(
    ['', 'VALUE'],
    Object.entries(result).map(([key, value]) => [
      key,
      typeof value === 'object' ? JSON.stringify(value) : String(value),
    ]),
  )}\n\nwritten to chaos-results.json`,
)

// ── clean up ─────────────────────────────────────────────────────────────────
await bridge.stop()
await worker.stop()
await publisher.close()
await rabbit.queueDelete({ queue }).catch(() => {})
await rabbit.exchangeDelete({ exchange }).catch(() => {})
await rabbit.close()
await producer.disconnect()
await admin.deleteTopics({ topics: [topic] }).catch(() => {})
await admin.disconnect()
await sql.end({ timeout: 1 })
await pgAdmin.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
await pgAdmin.end({ timeout: 1 })
proxy.server.close()
provider.server.close()
const ok = lost.length === 0 && duplicates === 0 && validDeadLettered.length === 0
process.exit(ok ? 0 : 1)
