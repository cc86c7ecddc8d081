/**
 * `npm run chaos` (CHAOS_EVENTS, default 3,000): events over the three sources,
 * valid and poison mixed, with hostile records (bad ids, oversized and binary
 * headers, empty, non-UTF-8, oversized and rewritable bodies) spread through
 * the traffic of each source, each followed by a valid event on the same
 * outbox / queue / partition. Meanwhile the harness SIGKILLs and restarts the
 * bridge three times, terminates its PostgreSQL connections, force-closes its
 * RabbitMQ connections, restarts the Kafka broker, makes the Worker's ingest
 * answer 503 to one request in five (in pairs) and then takes the Worker away entirely for a minute
 * (CHAOS_OUTAGE_SECONDS) with `idle_in_transaction_session_timeout = 5s` on
 * the outbox database, fails 25 % of email sends transiently and 5 % with a
 * 429 and a `retry-after`, revokes the provider's API key for a while, sends
 * PIN decisions whose owners' contacts arrive later, loses the answers of
 * some batches after taking them and refuses others 503 right before the key
 * is revoked (their retries meet the refusals and the pause), erases the
 * owners of some batches waiting for their retry, and for a phase makes
 * every send slow — near the transport's timeout, every third past it — while
 * the cron runs. Among the
 * single events (each to an owner of its own: one email each), some owners get
 * a burst of responses close together (CHAOS_BURST_OWNERS), told in their
 * digests, some bursts across a fault's start. Then
 * it reconciles, prints a table, writes chaos-results.json, and exits non-zero
 * when an event was lost (a burst's: named in no email), an address got two
 * emails (a burst's owner may get two digests: for a burst, an event named in
 * two emails), an event was told to another owner, one notification was
 * being sent by two senders at once or retried with another payload (the
 * fake provider keeps Resend's idempotency rules), a valid event dead-lettered, a
 * source stalled behind a bad record, a dead letter's bytes differ from what
 * was published, a bad record ended anywhere but where it should, a
 * notification was ended by the revoked key (`burned`: it must pause), a
 * retry came before the time a 429 named (`early_retries`), a request went
 * over the team's rate (`provider_over_rate_limit`: the stand-in keeps a
 * sliding one-second window), a pause never
 * ended (`stalled_paused`), a notification failed without its dead letter
 * (`failed_without_dead_letter`), or an erased owner was emailed after the
 * erasure (`emails_after_erasure`). With CHAOS_DB_SHARDS=2 the Worker spreads
 * its recipients over two D1 databases (DB_SHARDS=2, docs/scaling.md) and the
 * reconciliation reads both.
 *
 * With CHAOS_FAILOVER=1 (`npm run chaos:failover`) the Worker has two
 * transports, EMAIL_TRANSPORTS = resend,cloudflare (docs/operating.md,
 * "Provider failover"), and the stand-in posts each accepted email's signed
 * delivery webhooks back to it, as Resend does. Its events are paced
 * (CHAOS_PACE_MS, 400 ms), so that resend takes a share of the mail, the
 * batch faults and lost answers among it, beside the binding (which takes
 * what resend's open circuit, a quarter of its sends failing, keeps from it).
 * The key is not refused during the traffic: then, as with one transport, it
 * would pause resend before the batch faults met batches. After the traffic,
 * events trickle in (four at once while the batch faults still wait for
 * batches), and each of Resend's two failures comes while resend is usable
 * and an event comes every second: the key refused for
 * CHAOS_KEY_REVOKED_SECONDS (resend pauses, and mail fails over to the
 * binding at once), then Resend down for CHAOS_PROVIDER_OUTAGE_SECONDS (500
 * to every request: its circuit opens); after each, a probe brings the mail
 * back to resend, and five more events go through it at the end.
 * The reconciliation counts the emails of both providers — the stand-in's and
 * the ones the local binding wrote — and fails the run, besides the above,
 * when either provider sent none (no failover was seen) or nothing went
 * through resend after the faults. An address emailed twice is listed with
 * its notifications' rows and delivery events (`duplicate_rows`).
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
import { startBridge } from '../support/bridge-process.ts'
import { leakedLines } from '../support/child-output.ts'
import {
  deadLetterOf,
  type HostileRecord,
  hostileRecords,
  publishHostile,
  type Source,
  validRecord,
} from '../support/hostile-records.ts'
import { type LocalMail, sentMail, sentMails, startLocalWorker } from '../support/local-worker.ts'
import { startProviderFake } from '../support/provider-fake.ts'
import { twoDatabaseConfig } from '../support/two-databases.ts'
import { waitFor } from '../support/wait.ts'

const EVENTS = Number(process.env.CHAOS_EVENTS ?? '3000')
const OUTAGE_SECONDS = Number(process.env.CHAOS_OUTAGE_SECONDS ?? '60')
const POISON_EVERY = 10
/**
 * The dispatch lease of the Worker under test: the least the configuration allows with the resend
 * transport's default 15 s timeout (three times it: no send may outlive a third of its lease).
 */
const LEASE_SECONDS = 45
/** How long a send takes in the slow phase: near the transport's timeout, the most of the lease a send may use. */
const SLOW_SEND_MS = 12_000
/** Every third slow send outlives the resend transport's 15 s timeout: accepted after the Worker gave up. */
const SLOWER_THAN_TIMEOUT_MS = 17_000
const SLOW_SENDS = Number(process.env.CHAOS_SLOW_SENDS ?? '30')
const SOURCES = ['postgres', 'rabbitmq', 'kafka'] as const
/** Owners who each get a burst of responses, and the bursts' sizes in turn. */
const BURST_OWNERS = Number(process.env.CHAOS_BURST_OWNERS ?? Math.max(3, Math.floor(EVENTS / 10)))
const BURST_SIZES = [2, 3, 4, 5]
const id = crypto.randomUUID().slice(0, 8)
/** Two transports, resend then cloudflare, and Resend failing in the middle of the run (CHAOS_FAILOVER=1). */
const FAILOVER = process.env.CHAOS_FAILOVER === '1'
/** How long Resend is down in the failover run: every request 500, long enough for its circuit to open. */
const PROVIDER_OUTAGE_SECONDS = Number(process.env.CHAOS_PROVIDER_OUTAGE_SECONDS ?? '30')
/**
 * A pause after each event sent (the failover run's default: 400 ms), so that the sending, and the faults
 * placed along it, spread over the time the Worker sends: without it the events go out in seconds and
 * every fault of the provider lands before resend took a share of the mail.
 */
const PACE_MS = Number(process.env.CHAOS_PACE_MS ?? (FAILOVER ? '400' : '0'))
/** The secret the stand-in signs its webhooks with, and the Worker checks them with. */
const WEBHOOK_SECRET = 'whsec_Y2hhb3MtcmVzZW5kLXdlYmhvb2stc2VjcmV0'
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

// ── the fake email provider (Resend's API and its rules), 25 % transient failures, 5 % 429s with a
// retry-after, a phase with the key revoked, a slow phase ──
// Resend's rate window is a second, so a 429's retry-after names at most the rest of it. The Worker
// holds every send of the account for it (src/dispatch/pace/): at 3 s, the run's drawn 429s alone
// would hold the sends for about as long as the run may take.
const RETRY_AFTER_SECONDS = 1
const KEY_REVOKED_SECONDS = Number(process.env.CHAOS_KEY_REVOKED_SECONDS ?? '60')
const LATE_CONTACTS = Math.max(3, Math.min(20, Math.floor(EVENTS / 15)))
const LATE_CONTACT_DELAY_MS = 15_000
const PROVIDER_RPS = Number(process.env.CHAOS_PROVIDER_RPS ?? '40')
const provider = await startProviderFake({
  failureRate: 0.25,
  rateLimitRate: 0.05,
  retryAfterSeconds: RETRY_AFTER_SECONDS,
  apiKey: 'chaos',
  // Resend's default is 5 requests per second per team, raised on request: the run uses a raised
  // one, and tells the Worker's pace the same (RESEND_REQUESTS_PER_SECOND below).
  requestsPerSecond: PROVIDER_RPS,
})

// ── the Worker under wrangler dev, with the resend transport pointed at the fake ──
const ADMIN = 'chaos-admin-token-0123456789'
const INGEST = 'chaos-ingest-token-0123456789'
execFileSync('bash', ['scripts/services-up.sh'], { stdio: 'ignore' })
// One D1 database, or two shards of it (CHAOS_DB_SHARDS=2).
const DB_SHARDS = process.env.CHAOS_DB_SHARDS ?? '1'
if (DB_SHARDS !== '1' && DB_SHARDS !== '2') throw new Error(`CHAOS_DB_SHARDS is 1 or 2, not ${DB_SHARDS}`)
const twoDatabases = DB_SHARDS === '2' ? twoDatabaseConfig() : undefined
const worker = await startLocalWorker(
  {
    ADMIN_TOKEN: ADMIN,
    INGEST_TOKEN: INGEST,
    EMAIL_TRANSPORT: 'resend',
    RESEND_API_KEY: 'chaos',
    RESEND_API_URL: provider.url,
    RESEND_REQUESTS_PER_SECOND: String(PROVIDER_RPS),
    // Nine quick retries: the 30 % failure rate is the point, not the waiting.
    DISPATCH_RETRY_DELAYS_SECONDS: '1,1,1,2,2,2,3,3,3',
    DISPATCH_LEASE_SECONDS: String(LEASE_SECONDS),
    // Small batches: many requests, so that every fault of the provider meets batches, not one or two of them.
    RESEND_BATCH_SIZE: process.env.CHAOS_BATCH_SIZE ?? '4',
    DB_SHARDS,
    ...(FAILOVER
      ? {
          EMAIL_TRANSPORTS: 'resend,cloudflare',
          RESEND_WEBHOOK_SECRET: WEBHOOK_SECRET,
          // The least allowed: an email that may have gone out through resend while resend cannot be
          // used waits this long for resend's delivery events before the binding sends it.
          UNKNOWN_OUTCOME_SECONDS: '60',
          // Not 5: a quarter of the sends fail 503 here, and the batch faults refuse four in a row, so five
          // would open the circuit by chance and keep resend out (its probe backs off) before the faults
          // meant for it. Resend down, every try fails: eight come within seconds.
          CIRCUIT_FAILURES: '8',
        }
      : {}),
  },
  twoDatabases ? { cron: true, config: twoDatabases.path, databases: ['DB', 'DB_1'] } : { cron: true },
)
/** The rows a read finds in every D1 database of the Worker, the primary's first. */
const DATABASES = twoDatabases ? ['DB', 'DB_1'] : ['DB']
const everywhere = async (sql: string) =>
  (await Promise.all(DATABASES.map((binding) => worker.query(sql, binding)))).flat()
/** A `count(*) AS n` over every D1 database. */
const countEverywhere = async (sql: string) => (await everywhere(sql)).reduce((sum, row) => sum + Number(row.n ?? 0), 0)
const WORKER = worker.url
// Resend posts each accepted email's delivery events back (the failover run's: an email that may have gone
// out through resend is settled by them, instead of going through the binding as well).
if (FAILOVER) provider.setWebhook({ url: `${WORKER}/v1/webhooks/resend`, secret: WEBHOOK_SECRET })
// A harness that fails half-way leaves no wrangler behind (nor, once started, a bridge).
process.on('exit', () => {
  worker.kill()
  twoDatabases?.remove()
})
// The cron trigger, as Cloudflare runs it (faster here): it re-enqueues what looks stuck.
let cronRuns = 0
const cron = setInterval(() => {
  worker.runCron().then(
    () => {
      cronRuns += 1
    },
    () => {},
  )
}, 2000)

// ── the fault proxy between bridge and Worker: 503 in bursts, or the Worker gone ──
let proxied = 0
let refused = 0
let workerDown = false
const proxy = await listen(async (request, response) => {
  const body = await readBody(request)
  if (workerDown) {
    request.socket.destroy()
    return
  }
  proxied += 1
  if (proxied % 10 >= 8) {
    refused += 1
    response
      .writeHead(503, { 'content-type': 'application/json' })
      .end('{"error":{"code":"QUEUE_UNAVAILABLE","message":"chaos"}}')
    return
  }
  try {
    const upstream = await fetch(`${WORKER}${request.url}`, {
      method: request.method,
      headers: { authorization: request.headers.authorization ?? '', 'content-type': 'application/json' },
      body: request.method === 'GET' ? undefined : body.toString('utf8'),
    })
    response.writeHead(upstream.status, { 'content-type': 'application/json' }).end(await upstream.text())
  } catch {
    // The Worker did not answer: so does the proxy (the bridge retries).
    request.socket.destroy()
  }
})

// ── the sources ──────────────────────────────────────────────────────────────
const pgAdmin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => {} })
const database = `notify_edge_chaos_${id}`
await pgAdmin.unsafe(`CREATE DATABASE ${database}`)
// As a DBA would: a session idle in a transaction for 5 s is killed. The relay must never be one.
await pgAdmin.unsafe(`ALTER DATABASE ${database} SET idle_in_transaction_session_timeout = '5s'`)
const pgUrl = `postgres://postgres@127.0.0.1:5432/${database}`
await migratePostgres(pgUrl)
const sql = postgres(pgUrl, { max: 2, onnotice: () => {} })
const rabbit = new Connection({
  url: 'amqp://guest:guest@127.0.0.1:5672',
  connectionName: 'chaos-publisher',
  frameMax: 131_072,
})
const exchange = `chaos.notifications.${id}`
const queue = `chaos.email.${id}`
const dlq = `chaos.email.${id}.dlq`
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
  PG_LEASE_MS: '5000',
  // The hostile outbox row without a data row is forwarded (and dead-lettered) after this wait for its data.
  PG_DATA_WAIT_MS: '2000',
  RABBITMQ_URL: 'amqp://guest:guest@127.0.0.1:5672',
  RABBITMQ_DECLARE: 'true',
  RABBITMQ_EXCHANGE: exchange,
  RABBITMQ_QUEUE: queue,
  RABBITMQ_DLQ: dlq,
  KAFKA_BROKERS: '127.0.0.1:9092',
  KAFKA_TOPICS: topic,
  KAFKA_GROUP_ID: `chaos-${id}`,
  LOG_LEVEL: 'warn',
}
let bridge = await startBridge(bridgeEnv)
process.on('exit', () => bridge.child.kill('SIGKILL'))
// Ready means every source consumes: the queue and its bindings exist before the first publish.
await waitFor(
  async () => ((await fetch(`http://127.0.0.1:${bridge.port}/readyz`)).ok ? true : undefined),
  'the bridge to be ready',
  120_000,
)

// ── the traffic: ArtHunt bodies over all three sources (any source can carry any contract) ──
const sample = JSON.parse(readFileSync('examples/arthunt/response.created.json', 'utf8'))
type Planned = { eventId: string; source: Source; valid: boolean; bytes: Buffer; to: string; index: number }
const planned: Planned[] = []
const publisher = rabbit.createPublisher({ confirm: true, maxAttempts: 20 })
/** Publishes with retries: the harness's own producers ride out the faults too. */
async function withRetries(act: () => Promise<unknown>) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      await act()
      return
    } catch (error) {
      if (attempt > 50) throw error
      await sleep(500)
    }
  }
}
async function send(index: number) {
  const eventId = crypto.randomUUID()
  const valid = index % POISON_EVERY !== 0
  const to = `chaos+${eventId}@example.com`
  const body = structuredClone(sample)
  body.envelope.eventId = eventId
  // An owner of its own: each of these is one email (bursts to one owner are told in one digest).
  body.data.recipient.userId = crypto.randomUUID()
  body.data.recipient.email = to
  if (!valid) delete body.data.recipient.email
  const bytes = Buffer.from(JSON.stringify(body))
  const source = SOURCES[index % 3] as Source
  planned.push({ eventId, source, valid, bytes, to, index })
  await publish(source, eventId, bytes)
}
/** One event on its source (an outbox row, an AMQP message, a Kafka record), with retries. */
async function publish(source: Source, eventId: string, bytes: Buffer) {
  await withRetries(async () => {
    if (source === 'postgres') {
      await sql.begin(async (tx) => {
        await tx`INSERT INTO data_exchange.message_queue_log (message_id) VALUES (${eventId})`
        await tx`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body) VALUES (${eventId}, ${bytes})`
      })
    } else if (source === 'rabbitmq') {
      await publisher.send(
        {
          exchange,
          routingKey: 'notifications.email.response.created',
          messageId: eventId,
          durable: true,
          mandatory: true,
        },
        bytes,
      )
    } else {
      await producer.send({ topic, messages: [{ key: eventId, value: bytes, headers: { 'message-id': eventId } }] })
    }
  })
}

// Hostile records, spread evenly through each source's traffic, each with a valid event right behind it.
const hostile = SOURCES.flatMap((source) => hostileRecords(source, `chaos-${id}`))
const hostileAt = new Map<number, HostileRecord[]>()
hostile.forEach((record, n) => {
  const at = Math.floor(((n + 1) * EVENTS) / (hostile.length + 1))
  hostileAt.set(at, [...(hostileAt.get(at) ?? []), record])
})
const behind: { record: HostileRecord; index: number }[] = []
const firstHostile = new Map<Source, number>()
async function sendHostile(record: HostileRecord, index: number) {
  const follower = validRecord(record.source, `chaos-${id}`)
  for (const next of [record, follower]) {
    await withRetries(() => publishHostile(next, { sql, publisher, exchange, producer, topic, partition: 0 }))
  }
  behind.push({ record: follower, index })
  if (!firstHostile.has(record.source)) firstHostile.set(record.source, index)
}

// ── faults, spread over the sending ──────────────────────────────────────────
const faults: string[] = []
const kafkaHome = join(process.env.NOTIFY_EDGE_CACHE ?? join(homedir(), '.cache', 'notify-edge'))
let idleInTransactionSeen = 0
let outageOver: Promise<void> = Promise.resolve()
let slowOver: Promise<void> = Promise.resolve()
const fault = async (name: string, act: () => Promise<void> | void) => {
  faults.push(name)
  progress(`fault: ${name}`)
  await act()
}
async function restartBridge(): Promise<void> {
  await bridge.kill()
  bridge = await startBridge(bridgeEnv)
}
/** The Worker unreachable for OUTAGE_SECONDS, while the bridge's PostgreSQL sessions are watched. */
function takeTheWorkerAway(): void {
  workerDown = true
  const until = Date.now() + OUTAGE_SECONDS * 1000
  outageOver = (async () => {
    while (Date.now() < until) {
      const [row] = await pgAdmin<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = ${database}
          AND application_name = 'notify-edge-bridge' AND state LIKE 'idle in transaction%'`
      idleInTransactionSeen += row?.n ?? 0
      await sleep(500)
    }
    workerDown = false
    progress('  the Worker is back')
  })()
}
/**
 * Every send near the transport's timeout, and every third slower than it, until
 * SLOW_SENDS of them went out (at most five minutes), the cron running. The cap is long because
 * other faults can hold the sends back meanwhile: a key refused while the provider is slow keeps
 * the transport paused for as long as its probes meet the slow or failing sends (110 s in one
 * run), and a slow phase that ended before its sends came would leave the lost answers untried.
 */
function slowDownTheProvider(): void {
  provider.setSlow([SLOW_SEND_MS, SLOW_SEND_MS, SLOWER_THAN_TIMEOUT_MS])
  slowOver = (async () => {
    await waitFor(() => (provider.stats.slowSends >= SLOW_SENDS ? true : undefined), 'slow sends', 300_000).catch(
      () => {},
    )
    provider.setSlow([])
    progress('  the provider is fast again')
  })()
}
/** The API key revoked (every send refused 403) for KEY_REVOKED_SECONDS, then restored: the transport must pause, not burn. */
let keyOver: Promise<void> = Promise.resolve()
function revokeTheKey(): void {
  provider.setKeyRevoked(true)
  keyOver = (async () => {
    await sleep(KEY_REVOKED_SECONDS * 1000)
    provider.setKeyRevoked(false)
    progress('  the API key is valid again')
  })()
}
/**
 * The failover run's faults of Resend after the traffic, each while events trickle in (one a second) and
 * resend is usable, so that sends meet it: the key refused for KEY_REVOKED_SECONDS (resend pauses, mail
 * fails over to the binding at once), or Resend down for PROVIDER_OUTAGE_SECONDS (every request 500,
 * nothing taken: CIRCUIT_FAILURES of them in a row open its circuit; an email one of them met may have gone
 * out, a 5xx, so it waits for resend's delivery events before the binding sends it).
 */
let resendFault: Promise<void> = Promise.resolve()
let resendFailing = false
function resendFails(set: (on: boolean) => void, seconds: number, over: string, met: () => boolean): () => void {
  return () => {
    set(true)
    resendFailing = true
    resendFault = (async () => {
      await sleep(seconds * 1000)
      // Held on until a request met it (at most three minutes more): a send held by the pace (a 429's
      // retry-after) can keep every request from Resend for the whole window, and the run would then have
      // tried nothing.
      await waitFor(async () => (met() ? true : undefined), 'a request to meet the fault', 180_000).catch(() =>
        progress('  no request met the fault'),
      )
      set(false)
      resendFailing = false
      progress(`  ${over}`)
    })()
  }
}
/**
 * PIN decisions over Kafka whose owners are not in the contact replica yet; each owner's
 * contact-upserted follows LATE_CONTACT_DELAY_MS later. Every decision must still be emailed.
 */
const lateContacts: { to: string }[] = []
let lateOver: Promise<void> = Promise.resolve()
/** One PIN record on the run's topic, keyed by its user, with retries like every producer of the harness. */
function publishPin(key: string, value: unknown, headers: Record<string, string>): Promise<void> {
  return withRetries(() => producer.send({ topic, messages: [{ key, value: JSON.stringify(value), headers }] }))
}
async function decisionsBeforeContacts(): Promise<void> {
  const decision = JSON.parse(readFileSync('examples/pin/verification-completed.json', 'utf8'))
  const contact = JSON.parse(readFileSync('examples/pin/contact-upserted.json', 'utf8'))
  const owners = Array.from({ length: LATE_CONTACTS }, () => crypto.randomUUID())
  for (const owner of owners) {
    const messageId = crypto.randomUUID()
    const value = { ...decision.value, RequestId: crypto.randomUUID(), PersonId: crypto.randomUUID(), UserId: owner }
    await publishPin(owner, value, { ...decision.headers, 'message-id': messageId, 'aggregate-id': value.RequestId })
    lateContacts.push({ to: `chaos+late-${owner}@example.com` })
  }
  lateOver = (async () => {
    await sleep(LATE_CONTACT_DELAY_MS)
    for (const owner of owners) {
      const value = { ...contact.value, UserId: owner, Email: `chaos+late-${owner}@example.com`, Version: 1 }
      await publishPin(owner, value, { ...contact.headers, 'message-id': crypto.randomUUID(), 'aggregate-id': owner })
    }
    progress(`  ${owners.length} late contacts published`)
  })()
}
/**
 * Batches meeting faults, as the lifecycle model found them broken: batches whose answers were
 * lost after Resend took them, and batches refused 503, just before the key is refused — their
 * retries meet the 403s and the pause — and, while they wait for their retry, the owners of some
 * of them erased (each single event is an owner of its own). Nobody is emailed twice, the pause
 * ends, every failed notification has its dead letter, and an erased owner gets nothing after
 * the erasure.
 */
const BATCH_FAULTS = 4
const ERASED_OWNERS = 3
const erased: { to: string; at: number }[] = []
let erasuresOver: Promise<void> = Promise.resolve()
function batchesMeetFaults(): void {
  provider.loseBatchAnswers(BATCH_FAULTS)
  provider.failBatches(BATCH_FAULTS)
  erasuresOver = (async () => {
    const until = Date.now() + 60_000
    while (erased.length < ERASED_OWNERS && Date.now() < until) {
      const waiting = await everywhere(
        `SELECT recipient_user_id AS user, recipient_email AS address FROM notifications
         WHERE batch_id IS NOT NULL AND status IN ('pending', 'paused') AND maybe_sent_at IS NOT NULL
           AND recipient_email LIKE 'chaos+%' AND recipient_email NOT LIKE 'chaos+burst-%'
           AND recipient_email NOT LIKE 'chaos+late-%' LIMIT ${ERASED_OWNERS - erased.length}`,
      )
      for (const row of waiting) {
        const answer = await worker.request('/v1/erasures', {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ userId: row.user }),
        })
        if (answer.ok) erased.push({ to: String(row.address), at: Date.now() })
      }
      await sleep(250)
    }
    progress(`  ${erased.length} owners erased while their batch waited for its retry`)
  })()
}
type Fault = [number, string, () => Promise<void> | void]
// With two transports the key is refused after the traffic instead, while resend is usable (below): here it
// would pause resend before batches met the batch faults, and the binding would take them.
const keyRefusedInTheTraffic: Fault[] = FAILOVER
  ? []
  : [[0.45, `the provider refuses the API key for ${KEY_REVOKED_SECONDS} s (403 invalid_api_key)`, revokeTheKey]]
const schedule: Fault[] = [
  [0.1, 'SIGKILL the bridge, restart it', restartBridge],
  [
    0.25,
    'terminate the bridge PostgreSQL connections',
    async () => {
      await pgAdmin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${database} AND application_name = 'notify-edge-bridge'`
    },
  ],
  [
    0.3,
    `slow provider for ${SLOW_SENDS} sends: each takes ${SLOW_SEND_MS / 1000} s under a ${LEASE_SECONDS} s dispatch lease, and every third ${SLOWER_THAN_TIMEOUT_MS / 1000} s, longer than the transport's timeout`,
    slowDownTheProvider,
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
  [
    0.2,
    `${LATE_CONTACTS} PIN decisions whose contacts arrive ${LATE_CONTACT_DELAY_MS / 1000} s later`,
    decisionsBeforeContacts,
  ],
  [
    0.44,
    `batches meet faults: the answers of the next ${BATCH_FAULTS} batches lost after they were taken, the next ${BATCH_FAULTS} refused 503, then the key refused (below), and the owners of up to ${ERASED_OWNERS} batches waiting for their retry erased`,
    batchesMeetFaults,
  ],
  ...keyRefusedInTheTraffic,
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
  [0.65, `the Worker unreachable for ${OUTAGE_SECONDS} s`, takeTheWorkerAway],
  [0.8, 'SIGKILL the bridge, restart it', restartBridge],
]
schedule.sort((a, b) => a[0] - b[0])

// ── bursts: responses to one owner close together, told in the owner's digest (the Worker's
// DIGEST_WINDOW_SECONDS is 2 here): one response per step of the sending, each on the next source.
// Spread evenly over the run; the burst nearest each fault's start is moved across it (its first
// response before the fault, the rest after), the Worker's outage and the provider's faults first.
// Each response's deepLink names its event, so the text of an email tells which events it carried.
type BurstOwner = { n: number; userId: string; to: string; size: number; start: number; moved: boolean }
type BurstEvent = { eventId: string; source: Source; index: number; to: string }
const burstOwners: BurstOwner[] = Array.from({ length: BURST_OWNERS }, (_, n) => {
  const userId = crypto.randomUUID()
  const size = BURST_SIZES[n % BURST_SIZES.length] as number
  const start = Math.floor(((n + 0.5) * EVENTS) / BURST_OWNERS)
  return { n, userId, to: `chaos+burst-${userId}@example.com`, size, start, moved: false }
})
const faultsFirst = new Set<unknown>([takeTheWorkerAway, revokeTheKey, slowDownTheProvider])
for (const [at] of [...schedule].sort((a, b) => Number(!faultsFirst.has(a[2])) - Number(!faultsFirst.has(b[2])))) {
  // A fault acts before the event of the first index at or past its share of the run.
  const across = Math.max(0, Math.ceil(at * EVENTS) - 1)
  const nearest = burstOwners
    .filter((owner) => !owner.moved)
    .sort((a, b) => Math.abs(a.start - across) - Math.abs(b.start - across))[0]
  if (!nearest) break
  nearest.start = across
  nearest.moved = true
}
const burstAt = new Map<number, { owner: BurstOwner; member: number }[]>()
for (const owner of burstOwners) {
  owner.start = Math.max(0, Math.min(owner.start, EVENTS - owner.size))
  for (let member = 0; member < owner.size; member += 1) {
    const index = owner.start + member
    burstAt.set(index, [...(burstAt.get(index) ?? []), { owner, member }])
  }
}
const bursts: BurstEvent[] = []
const BURST_LINK = new RegExp(`/projects/chaos-${id}/responses/([0-9a-f-]{36})`, 'g')
async function sendBurst(owner: BurstOwner, member: number, index: number) {
  const eventId = crypto.randomUUID()
  const source = SOURCES[(owner.n + member) % SOURCES.length] as Source
  const body = structuredClone(sample)
  body.envelope.eventId = eventId
  body.data.responseId = crypto.randomUUID()
  body.data.recipient.userId = owner.userId
  body.data.recipient.email = owner.to
  body.data.deepLink = `https://arthunt.ru/projects/chaos-${id}/responses/${eventId}`
  bursts.push({ eventId, source, index, to: owner.to })
  await publish(source, eventId, Buffer.from(JSON.stringify(body)))
}

progress(
  `sending ${EVENTS} events (1 in ${POISON_EVERY} poison), bursts of responses to ${burstOwners.length} owners and ${hostile.length} hostile records over PostgreSQL, RabbitMQ and Kafka`,
)
const started = Date.now()
let next = 0
for (let index = 0; index < EVENTS; index += 1) {
  while (next < schedule.length && index >= (schedule[next]?.[0] ?? 1) * EVENTS) {
    const [, name, act] = schedule[next] as (typeof schedule)[number]
    await fault(name, act)
    next += 1
  }
  for (const record of hostileAt.get(index) ?? []) await sendHostile(record, index)
  await send(index)
  for (const { owner, member } of burstAt.get(index) ?? []) await sendBurst(owner, member, index)
  if (PACE_MS > 0) await sleep(PACE_MS)
  if (index % 500 === 499) progress(`  sent ${index + 1}`)
}
await Promise.all([outageOver, slowOver, keyOver, lateOver, erasuresOver])
/**
 * The failover run, after the traffic: a paused resend comes back only by a probe, an email never tried
 * that the claim sends through it once the probe is due — with no more traffic, none would come. So events
 * trickle in (each one more email expected): until resend is back from the revoked key; then, one a
 * second, while Resend is down (its circuit opens on them, and mail fails over to the binding); then until
 * its circuit closed, and TRICKLE_AFTER more, which go through resend again.
 */
const trickled: number[] = []
/** Events trickled once resend is back: its share of the mail after the faults. */
const TRICKLE_AFTER = 5
/** Sends an event every `everyMs` until `done()` says so after one (or `limitMs` passed). */
async function trickle(everyMs: number, done: () => Promise<boolean> | boolean, limitMs = 8 * 60_000) {
  const until = Date.now() + limitMs
  while (Date.now() < until) {
    // Four at once while the batch faults wait for batches: emails due together go to resend as one batch.
    for (let n = batchFaultsMet() ? 1 : 4; n > 0; n -= 1) {
      const index = planned.length
      trickled.push(index)
      await send(index)
    }
    await sleep(everyMs)
    if (await done()) return
  }
}
/** Whether batches met the batch faults: one refused 503, one whose answer was lost. */
const batchFaultsMet = () => provider.stats.batchesFailed > 0 && provider.stats.batchAnswersLost > 0
const resendUsable = async () =>
  batchFaultsMet() && (await countEverywhere('SELECT count(*) AS n FROM transport_pauses')) === 0
let faultsOverAt = Date.now()
if (FAILOVER) {
  for (const [name, act] of [
    [
      `the key refused for ${KEY_REVOKED_SECONDS} s (403 invalid_api_key) while an event comes every second: resend pauses, mail fails over to the send_email binding`,
      resendFails(
        (on) => provider.setKeyRevoked(on),
        KEY_REVOKED_SECONDS,
        'the API key is valid again',
        () => provider.stats.refusedForKey > 0,
      ),
    ],
    [
      `Resend down for ${PROVIDER_OUTAGE_SECONDS} s (500 internal_server_error to every request) while an event comes every second: its circuit opens, mail fails over to the send_email binding`,
      resendFails(
        (on) => provider.setOutage(on),
        PROVIDER_OUTAGE_SECONDS,
        'Resend answers again',
        () => provider.stats.outageFailures > 0,
      ),
    ],
  ] as const) {
    progress('trickling events until resend is usable…')
    await trickle(3000, resendUsable)
    await fault(name, act)
    await trickle(1000, () => !resendFailing)
    await resendFault
  }
  faultsOverAt = Date.now()
  progress('trickling events until its circuit closes…')
  await trickle(3000, resendUsable)
  let after = 0
  await trickle(3000, () => {
    after += 1
    return after >= TRICKLE_AFTER
  })
  progress(`  ${trickled.length} events trickled`)
}

// ── reconcile ────────────────────────────────────────────────────────────────
const valid = planned.filter((event) => event.valid)
// An erased owner may have been emailed before the erasure, and must not be after it.
const erasedAddresses = new Set(erased.map(({ to }) => to.toLowerCase()))
const expectedEmails = new Map<string, { source: Source; index: number }>([
  ...valid.map((event) => [event.to, { source: event.source, index: event.index }] as const),
  ...behind.map(
    ({ record, index }) => [(record.expect as { emailTo: string }).emailTo, { source: record.source, index }] as const,
  ),
  ...hostile.flatMap((record) =>
    'emailTo' in record.expect ? [[record.expect.emailTo, { source: record.source, index: -1 }] as const] : [],
  ),
  ...lateContacts.map(({ to }) => [to, { source: 'kafka' as Source, index: -1 }] as const),
])
for (const to of expectedEmails.keys()) if (erasedAddresses.has(to.toLowerCase())) expectedEmails.delete(to)
// A burst's owner may get more than one email (a digest closed inside the burst): its emails are
// counted by the events they name, not by address.
const burstAddresses = new Set(burstOwners.map((owner) => owner.to))
/**
 * One email a provider took: the stand-in's by its Idempotency-Key (a batch member's `key#index`), the
 * local send_email binding's (the failover run's second provider) by the Message-ID it gave it.
 */
type Email = { provider: 'resend' | 'cloudflare'; key: string; to: string; text: string; at: number }
/** What the local binding wrote, as last read (`readBinding`), with the text of each burst owner's email. */
let bindingEmails: Email[] = []
const bindingTexts = new Map<string, string>()
/** Reads the local binding's emails again (the failover run's; none otherwise). */
async function readBinding(): Promise<void> {
  if (!FAILOVER) return
  const mails: LocalMail[] = await sentMails(WORKER)
  const read: Email[] = []
  for (const mail of mails) {
    const to = mail.to[0] ?? ''
    // Only a burst owner's email is read whole: its text names the events it told.
    if (burstAddresses.has(to) && !bindingTexts.has(mail.messageId)) {
      bindingTexts.set(mail.messageId, (await sentMail(WORKER, mail.messageId))?.text ?? '')
    }
    read.push({
      provider: 'cloudflare',
      key: `cloudflare:${mail.messageId}`,
      to,
      text: bindingTexts.get(mail.messageId) ?? '',
      at: Date.parse(mail.sentAt),
    })
  }
  bindingEmails = read
}
/** Every email of both providers: the stand-in's, then the binding's. */
const allEmails = (): Email[] => [
  ...[...provider.emails].map(([key, email]) => ({ provider: 'resend' as const, key, ...email })),
  ...bindingEmails,
]
const emailByKey = () => new Map(allEmails().map((email) => [email.key, email]))
const mailed = () => {
  const count = new Map<string, number>()
  for (const { to } of allEmails()) {
    if (!burstAddresses.has(to)) count.set(to, (count.get(to) ?? 0) + 1)
  }
  return count
}
/** For each burst event named in an email's text, the emails (provider keys) that name it. */
const burstIds = new Set(bursts.map((event) => event.eventId))
const mentions = () => {
  const told = new Map<string, string[]>()
  for (const { key, text } of allEmails()) {
    const named = new Set([...text.matchAll(BURST_LINK)].map((match) => match[1] as string))
    for (const eventId of named) if (burstIds.has(eventId)) told.set(eventId, [...(told.get(eventId) ?? []), key])
  }
  return told
}
progress('waiting for every expected email…')
const deadline = Date.now() + Number(process.env.CHAOS_TIMEOUT_MS ?? 600_000)
let lastReport = 0
const missingSingles = () => {
  const have = mailed()
  return [...expectedEmails].filter(([to]) => !have.has(to))
}
const missingBursts = (told: ReadonlyMap<string, readonly string[]>) =>
  bursts
    .filter((event) => !told.has(event.eventId))
    .map((event) => [event.eventId, { source: event.source, index: event.index }] as const)
const missing = () => [...missingSingles(), ...missingBursts(mentions())]
const awaited = expectedEmails.size + bursts.length
await readBinding()
while (Date.now() < deadline && missing().length > 0) {
  await sleep(1000)
  await readBinding()
  if (Date.now() - lastReport > 10_000) {
    lastReport = Date.now()
    const bySource = Object.fromEntries(
      SOURCES.map((source) => [source, missing().filter(([, where]) => where.source === source).length]),
    )
    progress(
      `  ${awaited - missing().length}/${awaited} emailed (of them ${bursts.length} burst events); missing by source ${JSON.stringify(bySource)}`,
    )
  }
}
// The failover run: an email that may have gone out through resend goes through the binding only after
// UNKNOWN_OUTCOME_SECONDS without resend's events, so a second email could come after every expected one
// arrived. The run ends once no email is on its way or waiting (at most five minutes more).
if (FAILOVER) {
  progress('waiting for every email to settle (none pending, sending, unknown or paused)…')
  await waitFor(
    async () =>
      (await countEverywhere(
        `SELECT count(*) AS n FROM notifications WHERE channel = 'email'
           AND status IN ('pending', 'sending', 'unknown', 'paused')`,
      )) === 0
        ? true
        : undefined,
    'every email to settle',
    300_000,
  ).catch(() => progress('  some emails are still on their way or waiting (left_waiting)'))
  await readBinding()
}
const told = mentions()
const burstLost = missingBursts(told)
const lost = [...missingSingles(), ...burstLost]
// A source stalled when something it carried after its first hostile record never arrived.
const stalled = SOURCES.filter((source) =>
  lost.some(([, where]) => where.source === source && where.index >= (firstHostile.get(source) ?? Infinity)),
)
// Duplicates: a second email to the same address, from another notification. A notification sent
// again under its Idempotency-Key is one email (the provider answers with the first answer); it
// would be two through a transport without one, so two senders of one notification at once (the
// lease failed) and a repeat with another payload (a retry that is not the same request) fail
// the run too.
// A burst's duplicate is an event named in two emails (two digests, or a digest and its own email).
const eventsInTwo = [...told].filter(([, keys]) => keys.length > 1)
const duplicates = [...mailed().values()].reduce((sum, count) => sum + Math.max(0, count - 1), 0) + eventsInTwo.length
const duplicateDetails = [
  ...[...mailed()]
    .filter(([, count]) => count > 1)
    .map(([to, count]) => {
      const keys = allEmails()
        .filter((email) => email.to === to)
        .map(({ key }) => key)
      return `${count} notifications to one address: ${keys.join(', ')}`
    }),
  ...eventsInTwo.map(([eventId, keys]) => `burst event ${eventId} in ${keys.length} emails: ${keys.join(', ')}`),
]
// What the bursts' owners got: how many events each email told, whose emails were more than one,
// and any event told to an address other than its owner's.
const burstEmails = allEmails().filter((email) => burstAddresses.has(email.to))
const burstEmailsByEventsTold: Record<string, number> = {}
for (const { key } of burstEmails) {
  const size = [...told.values()].filter((keys) => keys.includes(key)).length
  burstEmailsByEventsTold[size] = (burstEmailsByEventsTold[size] ?? 0) + 1
}
const burstOwnersSplit = burstOwners.filter(
  (owner) => burstEmails.filter((email) => email.to === owner.to).length > 1,
).length
const byKey = emailByKey()
const burstToAnotherOwner = bursts.filter((event) =>
  (told.get(event.eventId) ?? []).some((key) => byKey.get(key)?.to !== event.to),
)
const { stats } = provider
// Notifications ended by our own configuration (the revoked key): they should have paused, not failed.
const burned = await countEverywhere(
  `SELECT count(*) AS n FROM notifications WHERE status = 'failed'
   AND (status_reason LIKE '%HTTP 401%' OR status_reason LIKE '%HTTP 403%' OR status_reason LIKE '%invalid_api_key%')`,
)
// The transport still paused at the end, or notifications left waiting for a probe: a pause that never ended.
const stalledPaused =
  (await countEverywhere("SELECT count(*) AS n FROM notifications WHERE status = 'paused'")) +
  (await countEverywhere('SELECT count(*) AS n FROM transport_pauses'))
// Every failed notification has its dead letter, whose message names it (in its own shard).
const failedWithoutDeadLetter = await countEverywhere(
  `SELECT count(*) AS n FROM notifications n WHERE status = 'failed' AND NOT EXISTS (
     SELECT 1 FROM dead_letters d WHERE d.queue = 'notify-dispatch'
       AND json_extract(d.body, '$.notificationId') = n.id)`,
)
const emailsAfterErasure = allEmails().filter((email) =>
  erased.some(({ to, at }) => to.toLowerCase() === email.to.toLowerCase() && email.at > at),
).length
// The failover run: what each provider took, what the Worker says each sent, and the failover's traces.
const emailsByProvider = {
  resend: provider.emails.size,
  cloudflare: bindingEmails.length,
}
const resendAfterTheFaults = [...provider.emails.values()].filter((email) => email.at > faultsOverAt).length
const sentByTransport: Record<string, number> = {}
for (const row of await everywhere(
  "SELECT transport, count(*) AS n FROM notifications WHERE status = 'sent' AND channel = 'email' GROUP BY transport",
)) {
  sentByTransport[String(row.transport)] = (sentByTransport[String(row.transport)] ?? 0) + Number(row.n)
}
// Emails that may have gone out through resend while it could not be used, held by the claim to wait for
// resend's events (`dispatch.failover-wait`; failover_from is cleared by the next claim): what became of
// them — sent through resend (its events settled them, or resend came back first) or through the binding.
const waitedIds = [
  ...new Set(
    [...worker.output().matchAll(/"event":"dispatch\.failover-wait"[^\n]*?"notificationId":"([^"]+)"/g)].map(
      (match) => match[1] as string,
    ),
  ),
]
const waitedForResendEvents: Record<string, number> = { emails: waitedIds.length }
if (waitedIds.length > 0) {
  const ids = waitedIds.map((waited) => `'${waited.replaceAll("'", "''")}'`).join(',')
  for (const row of await everywhere(
    `SELECT status, transport, count(*) AS n FROM notifications WHERE id IN (${ids}) GROUP BY status, transport`,
  )) {
    const key = `${row.status} through ${row.transport}`
    waitedForResendEvents[key] = (waitedForResendEvents[key] ?? 0) + Number(row.n)
  }
}
/** How often the Worker logged each transport event (transport.paused, .failover, .probe, .resumed). */
const transportEvents: Record<string, number> = {}
for (const match of worker.output().matchAll(/"event":"(transport\.[a-z-]+)"(?:[^\n]*?"code":"(circuit-open)")?/g)) {
  const name = match[2] && match[1] === 'transport.resumed' ? `${match[1]} (circuit-open)` : (match[1] as string)
  transportEvents[name] = (transportEvents[name] ?? 0) + 1
}
/** Of each address emailed twice, its notifications' rows and delivery events, to tell how. */
const duplicateRows = await Promise.all(
  [...mailed()]
    .filter(([, count]) => count > 1)
    .map(async ([to]) => {
      const address = to.replaceAll("'", "''")
      const rows = await everywhere(
        `SELECT id, status, transport, failover_from, maybe_sent_at, status_reason, provider_id, send_attempts,
                batch_id, claimed_at, sent_at, created_at, updated_at
         FROM notifications WHERE recipient_email = '${address}' AND channel = 'email' ORDER BY created_at`,
      )
      const ids = rows.map((row) => `'${String(row.id).replaceAll("'", "''")}'`).join(',')
      const events = ids
        ? await everywhere(
            `SELECT notification_id, provider, type, status, provider_message_id, occurred_at, received_at
             FROM delivery_events WHERE notification_id IN (${ids}) ORDER BY received_at`,
          )
        : []
      const emails = allEmails()
        .filter((email) => email.to === to)
        .map(({ provider: by, key, at }) => ({ provider: by, key, at: new Date(at).toISOString() }))
      return { emails, notifications: rows, delivery_events: events }
    }),
)
const waitingAtTheEnd = await everywhere(
  "SELECT status, count(*) AS n FROM notifications WHERE status IN ('paused', 'awaiting-contact', 'unknown') GROUP BY status",
)

const deadLetters: { eventId: string | null; code: string }[] = []
let cursor: string | null = null
do {
  const path = `/v1/dead-letters?limit=500${cursor ? `&cursor=${cursor}` : ''}`
  const read = () => worker.request(path, { headers: { authorization: `Bearer ${ADMIN}` } })
  // A read asked once more when its pooled connection was closed under it ("other side closed": wrangler
  // dev ended an idle keep-alive connection while the harness read D1 through wrangler d1 execute).
  const page = (await (await read().catch(read)).json()) as {
    items: { eventId: string | null; code: string }[]
    nextCursor: string | null
  }
  deadLetters.push(...page.items)
  cursor = page.nextCursor
} while (cursor)
const validIds = new Set([...valid.map((event) => event.eventId), ...burstIds])
const validDeadLettered = deadLetters.filter((letter) => letter.eventId && validIds.has(letter.eventId))
const byCode: Record<string, number> = {}
for (const letter of deadLetters) byCode[letter.code] = (byCode[letter.code] ?? 0) + 1

// Bytes in, bytes out, and each hostile record where it belongs.
progress('comparing dead letters with the published bytes…')
let bytesAltered = 0
const hostileWrong: string[] = []
const letterOf = (lookup: string) =>
  waitFor(() => deadLetterOf(worker.request, ADMIN, lookup), `the dead letter of ${lookup}`, 60_000).catch(
    () => undefined,
  )
for (const poison of planned.filter((event) => !event.valid)) {
  const letter = await letterOf(poison.eventId)
  if (!letter?.bytes.equals(poison.bytes)) bytesAltered += 1
}
for (const record of hostile) {
  if (!('deadLetter' in record.expect)) continue
  const letter = await letterOf(record.lookup)
  if (letter?.code !== record.expect.deadLetter) hostileWrong.push(`${record.source}: ${record.name} → ${letter?.code}`)
  else if (letter.code !== 'NTF_PAYLOAD_TOO_LARGE' && !letter.bytes.equals(record.body ?? Buffer.alloc(0))) {
    bytesAltered += 1
  }
}

const result = {
  ran_at: new Date().toISOString(),
  seconds: Math.round((Date.now() - started) / 1000),
  events_sent: planned.length,
  events_by_source: Object.fromEntries(
    SOURCES.map((source) => [source, planned.filter((e) => e.source === source).length]),
  ),
  poison_sent: planned.length - valid.length,
  hostile_records: hostile.length,
  emails_expected: expectedEmails.size,
  emails_sent: expectedEmails.size - (lost.length - burstLost.length),
  lost: lost.length,
  duplicates,
  ...(FAILOVER
    ? {
        transports: 'resend,cloudflare',
        // Emails each provider took: the stand-in's, and the ones the local send_email binding wrote.
        emails_by_provider: emailsByProvider,
        // What the Worker's rows say each transport sent.
        notifications_sent_by_transport: sentByTransport,
        emails_through_resend_after_the_faults: resendAfterTheFaults,
        // Emails that may have gone out through resend while it could not be used, and what became of them.
        waited_for_resend_events: waitedForResendEvents,
        worker_transport_events: transportEvents,
        provider_outage_seconds: PROVIDER_OUTAGE_SECONDS,
        provider_500_while_down: stats.outageFailures,
        provider_webhooks_delivered: stats.webhooksDelivered,
        events_trickled_after_the_faults: trickled.length,
        duplicate_rows: duplicateRows,
      }
    : {}),
  // A pause still on, or a notification still waiting for one, once everything else arrived.
  stalled_paused: stalledPaused,
  failed_without_dead_letter: failedWithoutDeadLetter,
  owners_erased_during_a_batch_retry: erased.length,
  emails_after_erasure: emailsAfterErasure,
  duplicate_details: duplicateDetails,
  burst_owners: burstOwners.length,
  burst_events: bursts.length,
  burst_emails: burstEmails.length,
  // Emails by how many burst events each told: 1 is a digest that told one, sent as its own email.
  burst_emails_by_events_told: burstEmailsByEventsTold,
  // Owners told their burst in more than one email (a digest closed while the burst arrived).
  burst_owners_with_two_or_more_emails: burstOwnersSplit,
  events_in_two_digests: eventsInTwo.length,
  burst_events_lost: burstLost.length,
  burst_events_told_to_another_owner: burstToAnotherOwner.length,
  valid_dead_lettered: validDeadLettered.length,
  stalled_sources: stalled.length,
  bytes_altered: bytesAltered,
  hostile_outcomes_wrong: hostileWrong,
  dead_letters_by_code: byCode,
  faults,
  ingest_503_bursts_answered: refused,
  worker_outage_seconds: OUTAGE_SECONDS,
  pg_bridge_sessions_idle_in_transaction_seen: idleInTransactionSeen,
  provider_requests: stats.requests,
  provider_transient_failures: stats.transientFailures,
  provider_slow_sends: stats.slowSends,
  // Accepted after our client gave up (the transport's timeout), then answered again to the retry.
  provider_answers_lost: stats.answersLost,
  provider_lost_answers_asked_again_and_replayed: stats.lostAnswersReplayed,
  provider_replays_of_the_same_request: stats.replays,
  provider_409_running_after_timeout: stats.concurrentAfterTimeout,
  provider_two_senders_at_once: stats.concurrentSenders,
  provider_key_reused_with_other_payload: stats.otherPayload,
  // A batch asked again without the members erased since: answered 409, its first request had gone out.
  provider_batches_asked_again_reduced: stats.reducedRepeats,
  provider_batch_answers_lost: stats.batchAnswersLost,
  provider_batches_refused_503: stats.batchesFailed,
  provider_refused_for_key: stats.refusedForKey,
  provider_refused_without_user_agent: stats.missingUserAgent,
  // Requests Resend's published OpenAPI document does not allow.
  provider_contract_violations: stats.contractViolations,
  provider_rate_limited_with_retry_after: stats.rateLimited,
  provider_over_rate_limit: stats.overRate,
  provider_batch_requests: stats.batchRequests,
  // Tries before the time a 429 named: the retry time is the row's, so there must be none.
  early_retries: stats.earlyRetries,
  burned,
  late_contact_decisions: lateContacts.length,
  left_waiting: waitingAtTheEnd,
  cron_runs: cronRuns,
  // What the bridge and wrangler printed, scanned like the Worker's test logs.
  log_lines_leaking_personal_data: leakedLines().length,
  d1_databases: Number(DB_SHARDS),
  // Each database's notifications: with two, the run did spread its recipients over both.
  notifications_by_database: await Promise.all(
    DATABASES.map(async (binding) =>
      Number((await worker.query('SELECT count(*) AS n FROM notifications', binding))[0]?.n ?? 0),
    ),
  ),
}
writeFileSync('chaos-results.json', `${JSON.stringify(result, null, 2)}\n`)
writeFileSync('chaos-worker.log', worker.output())
console.log(
  `\n${renderTable(
    ['', 'VALUE'],
    Object.entries(result).map(([key, value]) => [
      key,
      // Each duplicate's rows are in chaos-results.json, and printed below the table.
      key === 'duplicate_rows'
        ? String(duplicateRows.length)
        : typeof value === 'object'
          ? JSON.stringify(value)
          : String(value),
    ]),
  )}\n\nwritten to chaos-results.json; the Worker's log of the run to chaos-worker.log`,
)
if (duplicateRows.length > 0) console.log(`\nthe addresses emailed twice:\n${JSON.stringify(duplicateRows, null, 2)}`)

// ── clean up ─────────────────────────────────────────────────────────────────
clearInterval(cron)
await bridge.stop()
await worker.stop()
twoDatabases?.remove()
await publisher.close()
for (const name of [queue, dlq]) await rabbit.queueDelete({ queue: name }).catch(() => {})
await rabbit.exchangeDelete({ exchange }).catch(() => {})
await rabbit.close()
await producer.disconnect()
await admin.deleteTopics({ topics: [topic] }).catch(() => {})
await admin.disconnect()
await sql.end({ timeout: 1 })
await pgAdmin.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
await pgAdmin.end({ timeout: 1 })
proxy.server.close()
provider.close()
const ok =
  lost.length === 0 &&
  duplicates === 0 &&
  stalledPaused === 0 &&
  failedWithoutDeadLetter === 0 &&
  emailsAfterErasure === 0 &&
  // Batches met the faults: answers lost, batches refused, the key refused after them.
  stats.batchAnswersLost > 0 &&
  stats.batchesFailed > 0 &&
  eventsInTwo.length === 0 &&
  burstLost.length === 0 &&
  burstToAnotherOwner.length === 0 &&
  stats.concurrentSenders === 0 &&
  stats.otherPayload === 0 &&
  // The key was refused (the fault happened), nothing was burned by it, and no retry came early.
  stats.refusedForKey > 0 &&
  burned === 0 &&
  stats.earlyRetries === 0 &&
  // The pace kept the team's rate: no request was refused for it (the drawn 429s are faults, not counted here).
  stats.overRate === 0 &&
  stats.missingUserAgent === 0 &&
  stats.contractViolations === 0 &&
  // The lost answers happened (the fault was exercised), and each was resolved by its retry.
  stats.answersLost > 0 &&
  // With two transports, one whose retry met resend paused is settled by its delivery events instead.
  (FAILOVER ? stats.lostAnswersReplayed <= stats.answersLost : stats.lostAnswersReplayed === stats.answersLost) &&
  // The failover happened (both providers took mail), and mail went through resend again after it
  // (a refusal failed over at once, a circuit opened and closed again).
  (!FAILOVER ||
    (emailsByProvider.resend > 0 &&
      emailsByProvider.cloudflare > 0 &&
      resendAfterTheFaults > 0 &&
      (transportEvents['transport.failover'] ?? 0) > 0 &&
      (transportEvents['transport.resumed (circuit-open)'] ?? 0) > 0)) &&
  validDeadLettered.length === 0 &&
  stalled.length === 0 &&
  bytesAltered === 0 &&
  hostileWrong.length === 0 &&
  idleInTransactionSeen === 0 &&
  result.log_lines_leaking_personal_data === 0
process.exit(ok ? 0 : 1)
