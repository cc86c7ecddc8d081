/**
 * `npm run bench`: throughput of each relay beside its baselines, measured in
 * the same run on this machine, and the Worker pipeline under `wrangler dev`.
 * Prints progress, then a table, and writes bench/results.json. Nothing here
 * is asserted: targets are for reading (docs/benchmarks.md). Exits non-zero when a
 * bench could not run to its end.
 *
 * BENCH_SCALE (default 1) multiplies every message count.
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { Kafka, logLevel, Partitioners } from 'kafkajs'
import type postgres from 'postgres'
import { Connection } from 'rabbitmq-client'
import { renderTable } from '../bin/table.ts'
import { claimOutboxBatch, markTransferred } from '../bridge/src/sources/postgres/sql.ts'
import { startBridge } from '../support/bridge-process.ts'
import { startLocalWorker } from '../support/local-worker.ts'
import { freshDatabase, transferredCount } from '../support/postgres.ts'
import { recordingSink } from '../support/recording-sink.ts'
import { waitFor } from '../support/wait.ts'

const SCALE = Number(process.env.BENCH_SCALE ?? '1')
const N = {
  pg: 50_000 * SCALE,
  pgBaseline: 5_000 * SCALE,
  rabbit: 20_000 * SCALE,
  kafka: 50_000 * SCALE,
  worker: 1_000 * SCALE,
  e2e: 100,
}
const results: Record<string, Record<string, unknown>> = {}
const progress = (text: string) => process.stdout.write(`[bench] ${text}\n`)
const rate = (count: number, ms: number) => Math.round((count / ms) * 1000)
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0)
}

execFileSync('bash', ['scripts/services-up.sh'], { stdio: 'ignore' })

// ── PostgreSQL outbox relay ──────────────────────────────────────────────────
async function fillOutbox(sql: postgres.Sql, count: number) {
  await sql`TRUNCATE data_exchange.message_queue_log_data, data_exchange.message_queue_log`
  await sql`INSERT INTO data_exchange.message_queue_log (message_id, created_at)
            SELECT gen_random_uuid(), now() + make_interval(secs => g / 1000.0) FROM generate_series(1, ${count}) g`
  await sql`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body)
            SELECT message_id, convert_to('{"envelope":{"eventId":"' || message_id || '"},"data":{}}', 'UTF8')
            FROM data_exchange.message_queue_log`
  await sql`VACUUM ANALYZE data_exchange.message_queue_log`
}

async function benchPostgres() {
  const db = await freshDatabase()
  const sink = await recordingSink()
  try {
    progress(`pg_relay: claim-and-mark ceiling over ${N.pg} rows (the relay's own claim and mark statements)`)
    await fillOutbox(db.sql, N.pg)
    let start = performance.now()
    for (;;) {
      const token = crypto.randomUUID()
      const rows = await claimOutboxBatch(db.sql, 'data_exchange', token, 30_000, 100)
      if (rows.length === 0) break
      const ids = rows.map((row) => row.message_id)
      await markTransferred(
        db.sql,
        'data_exchange',
        token,
        ids,
        ids.map(() => 'event'),
      )
    }
    const claimOnly = rate(N.pg, performance.now() - start)

    progress(
      `pg_relay: the PushOccurrence algorithm (one transaction and one forward per message) over ${N.pgBaseline} rows`,
    )
    await fillOutbox(db.sql, N.pgBaseline)
    const ids = (await db.sql`SELECT message_id FROM data_exchange.message_queue_log ORDER BY created_at`).map(
      (row) => row.message_id as string,
    )
    start = performance.now()
    for (const id of ids) {
      await db.sql.begin(async (tx) => {
        const [row] = await tx`SELECT l.message_id, d.message_body FROM data_exchange.message_queue_log l
                               JOIN data_exchange.message_queue_log_data d USING (message_id)
                               WHERE l.message_id = ${id} FOR UPDATE OF l SKIP LOCKED`
        if (!row) return
        const event = {
          source: 'postgres',
          origin: `postgres:${id}`,
          sourceMessageId: id,
          receivedAt: new Date().toISOString(),
          headers: {},
          body: Buffer.from(row.message_body).toString(),
        }
        const response = await fetch(sink.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ events: [event] }),
        })
        await response.text()
        await tx`UPDATE data_exchange.message_queue_log SET transferred = true, transfer_time = now() WHERE message_id = ${id}`
      })
    }
    const perMessage = rate(N.pgBaseline, performance.now() - start)

    progress(`pg_relay: the bridge over ${N.pg} rows`)
    await fillOutbox(db.sql, N.pg)
    sink.accepted.length = 0
    start = performance.now()
    const relay = await startBridge({ PG_URL: db.url, SINK_URL: sink.url, LOG_LEVEL: 'warn' })
    await waitFor(async () => ((await transferredCount(db.sql)) >= N.pg ? true : undefined), 'the relay', 600_000)
    const bridge = rate(N.pg, performance.now() - start)
    await relay.stop()
    results.pg_relay = {
      msgs_per_s: bridge,
      per_message_baseline_msgs_per_s: perMessage,
      claim_only_msgs_per_s: claimOnly,
      of_claim_only: `${Math.round((bridge / claimOnly) * 100)}% (goal ≥ 50%)`,
      rows: N.pg,
    }
  } finally {
    await sink.close()
    await db.drop()
  }
}

// ── RabbitMQ ─────────────────────────────────────────────────────────────────
async function benchRabbit() {
  const url = 'amqp://guest:guest@127.0.0.1:5672'
  const rabbit = new Connection({ url, connectionName: 'notify-edge-bench' })
  const id = crypto.randomUUID().slice(0, 8)
  const exchange = `bench.notifications.${id}`
  const queue = `bench.email.${id}`
  const sink = await recordingSink()
  const preload = async () => {
    await rabbit.exchangeDeclare({ exchange, type: 'topic', durable: true })
    await rabbit.queueDeclare({
      queue,
      durable: true,
      arguments: {
        'x-dead-letter-exchange': 'email.notifications.dlx',
        'x-dead-letter-routing-key': 'email.notifications.dlq',
      },
    })
    await rabbit.queueBind({ queue, exchange, routingKey: 'notifications.email.response.created' })
    const publisher = rabbit.createPublisher({ confirm: true, maxAttempts: 3 })
    const body = Buffer.from(JSON.stringify({ envelope: { eventType: 'response.created' }, data: {} }))
    for (let sent = 0; sent < N.rabbit; sent += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, N.rabbit - sent) }, () =>
          publisher.send(
            {
              exchange,
              routingKey: 'notifications.email.response.created',
              messageId: crypto.randomUUID(),
              durable: true,
            },
            body,
          ),
        ),
      )
    }
    await publisher.close()
  }
  const depth = async () => (await rabbit.queueDeclare({ queue, passive: true })).messageCount
  try {
    progress(`rabbitmq_relay: consume-and-ack only over ${N.rabbit} messages`)
    await preload()
    let consumed = 0
    let start = performance.now()
    const consumer = rabbit.createConsumer(
      { queue, queueOptions: { passive: true }, qos: { prefetchCount: 200 }, concurrency: 200 },
      () => {
        consumed += 1
      },
    )
    await waitFor(() => (consumed >= N.rabbit ? true : undefined), 'consume-only', 600_000)
    const consumeOnly = rate(N.rabbit, performance.now() - start)
    await consumer.close()

    progress(`rabbitmq_relay: the bridge over ${N.rabbit} messages`)
    await preload()
    start = performance.now()
    const relay = await startBridge({
      RABBITMQ_URL: url,
      RABBITMQ_QUEUE: queue,
      RABBITMQ_PREFETCH: '200',
      SINK_URL: sink.url,
      LOG_LEVEL: 'warn',
    })
    await waitFor(() => (sink.accepted.length >= N.rabbit ? true : undefined), 'the relay', 600_000)
    const bridge = rate(N.rabbit, performance.now() - start)
    await relay.stop()
    progress(`rabbitmq_relay: queue depth after the run ${await depth()}`)
    results.rabbitmq_relay = { msgs_per_s: bridge, consume_only_msgs_per_s: consumeOnly, messages: N.rabbit }
  } finally {
    await rabbit.queueDelete({ queue }).catch(() => {})
    await rabbit.exchangeDelete({ exchange }).catch(() => {})
    await rabbit.close()
    await sink.close()
  }
}

// ── Kafka ────────────────────────────────────────────────────────────────────
async function benchKafka() {
  const kafka = new Kafka({ clientId: 'notify-edge-bench', brokers: ['127.0.0.1:9092'], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const topic = `bench.pin.${crypto.randomUUID().slice(0, 8)}`
  const sink = await recordingSink()
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true })
    progress(`kafka_relay: producing ${N.kafka} records`)
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
    await producer.connect()
    const value = JSON.stringify({ PersonId: crypto.randomUUID(), UserId: crypto.randomUUID() })
    for (let sent = 0; sent < N.kafka; sent += 1000) {
      await producer.send({
        topic,
        messages: Array.from({ length: Math.min(1000, N.kafka - sent) }, (_, index) => ({
          key: String((sent + index) % 97),
          value,
          headers: { 'message-id': crypto.randomUUID(), 'event-type': 'person-upserted' },
        })),
      })
    }
    await producer.disconnect()
    const committedToEnd = async (group: string) => {
      const [ends, [committed]] = await Promise.all([
        admin.fetchTopicOffsets(topic),
        admin.fetchOffsets({ groupId: group, topics: [topic] }),
      ])
      return ends.every((end) => committed?.partitions.find((p) => p.partition === end.partition)?.offset === end.high)
    }

    progress('kafka_relay: consume-and-commit only')
    const group = `bench-consume-${crypto.randomUUID().slice(0, 8)}`
    const consumer = kafka.consumer({ groupId: group })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    let start = 0
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 3,
      eachBatch: async ({ batch, resolveOffset }) => {
        if (start === 0) start = performance.now()
        const last = batch.messages.at(-1)
        if (!last) return
        resolveOffset(last.offset)
        await consumer.commitOffsets([
          { topic: batch.topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() },
        ])
      },
    })
    await waitFor(async () => ((await committedToEnd(group)) ? true : undefined), 'consume-only', 600_000)
    const consumeOnly = rate(N.kafka, performance.now() - start)
    await consumer.disconnect()

    progress('kafka_relay: the bridge')
    const bridgeGroup = `bench-bridge-${crypto.randomUUID().slice(0, 8)}`
    const relay = await startBridge({
      KAFKA_BROKERS: '127.0.0.1:9092',
      KAFKA_TOPICS: topic,
      KAFKA_GROUP_ID: bridgeGroup,
      SINK_URL: sink.url,
      LOG_LEVEL: 'warn',
    })
    await waitFor(() => (sink.accepted.length > 0 ? true : undefined), 'the first record', 120_000)
    start = performance.now() - 0
    const first = sink.accepted.length
    await waitFor(async () => ((await committedToEnd(bridgeGroup)) ? true : undefined), 'the relay', 600_000)
    const bridge = rate(N.kafka - first, performance.now() - start)
    await relay.stop()
    results.kafka_relay = { msgs_per_s: bridge, consume_only_msgs_per_s: consumeOnly, records: N.kafka }
  } finally {
    await admin.deleteTopics({ topics: [topic] }).catch(() => {})
    await admin.disconnect()
    await sink.close()
  }
}

// ── The Worker under wrangler dev, and PostgreSQL commit → email ─────────────
async function benchWorker() {
  const ingest = 'bench-ingest-token-0123456789'
  const adminToken = 'bench-admin-token-0123456789'
  const local = await startLocalWorker({ INGEST_TOKEN: ingest, ADMIN_TOKEN: adminToken, LOG_LEVEL: 'info' })
  const worker = local.url
  const db = await freshDatabase()
  try {
    const sentCount = async () => {
      const text = await (
        await fetch(`${worker}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } })
      ).text()
      return [...text.matchAll(/^notify_notifications_total\{[^}]*status="sent"\} (\d+)$/gm)].reduce(
        (sum, match) => sum + Number(match[1]),
        0,
      )
    }
    const event = () => {
      const eventId = crypto.randomUUID()
      const sample = {
        envelope: {
          eventId,
          eventType: 'response.created',
          schemaVersion: 1,
          occurredAt: new Date().toISOString(),
          producer: 'bench',
        },
        data: {
          responseId: crypto.randomUUID(),
          projectId: crypto.randomUUID(),
          projectTitle: 'Бенчмарк',
          recipient: { userId: crypto.randomUUID(), email: 'bench@example.com', displayName: 'Bench' },
          actor: { userId: crypto.randomUUID(), displayName: 'Actor' },
          proposedPrice: 45000,
          deepLink: 'https://arthunt.ru/x',
        },
      }
      return {
        eventId,
        inbound: {
          source: 'http',
          origin: 'bench',
          sourceMessageId: eventId,
          receivedAt: new Date().toISOString(),
          headers: {},
          body: JSON.stringify(sample),
        },
      }
    }
    const post = (events: unknown[]) =>
      fetch(`${worker}/v1/ingest`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ingest}`, 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
      }).then((r) => r.text())

    progress('worker_pipeline: D1 round trips per consumer batch at batch sizes 1, 10 and 100')
    const roundTrips: Record<string, number[]> = {}
    for (const size of [1, 10, 100]) {
      const before = local.output().length
      const baseline = await sentCount()
      await post(Array.from({ length: size }, () => event().inbound))
      await waitFor(
        async () => ((await sentCount()) >= baseline + size ? true : undefined),
        `batch of ${size}`,
        120_000,
      )
      const lines = [
        ...local
          .output()
          .slice(before)
          .matchAll(/"event":"materialize\.batch"[^\n]*"messages":(\d+),"d1RoundTrips":(\d+)/g),
      ]
      const batches = lines.map((match) => ({ messages: Number(match[1]), trips: Number(match[2]) }))
      if (batches.length === 0) throw new Error(`no materialize.batch line in the Worker's log for a batch of ${size}`)
      roundTrips[String(size)] = batches.map((batch) => batch.trips)
      progress(
        `  ${size}: consumer batches ${batches.map((b) => `${b.messages} msgs → ${b.trips} round trips`).join(', ')}`,
      )
    }

    progress(`worker_pipeline: ${N.worker} events, ingest → email`)
    const baseline = await sentCount()
    const sentAt = new Map<string, number>()
    const start = performance.now()
    for (let sent = 0; sent < N.worker; sent += 100) {
      const events = Array.from({ length: Math.min(100, N.worker - sent) }, () => event())
      const at = Date.now()
      for (const item of events) sentAt.set(item.eventId, at)
      await post(events.map((item) => item.inbound))
    }
    await waitFor(async () => ((await sentCount()) >= baseline + N.worker ? true : undefined), 'all emails', 600_000)
    const pipelineRate = rate(N.worker, performance.now() - start)
    const latencies: number[] = []
    for (const [eventId, at] of [...sentAt].slice(0, 200)) {
      const story = (await (
        await fetch(`${worker}/v1/events/${eventId}`, { headers: { authorization: `Bearer ${adminToken}` } })
      ).json()) as { notifications: { sentAt: string }[] }
      const sent = story.notifications[0]?.sentAt
      if (sent) latencies.push(Date.parse(sent) - at)
    }
    results.worker_pipeline = {
      msgs_per_s: pipelineRate,
      d1_round_trips_per_batch: Object.fromEntries(
        Object.entries(roundTrips).map(([size, trips]) => [size, Math.max(...trips)]),
      ),
      p50_ms: percentile(latencies, 50),
      p99_ms: percentile(latencies, 99),
      events: N.worker,
    }

    progress(`end_to_end: ${N.e2e} outbox rows, PostgreSQL commit → email`)
    const relay = await startBridge({
      PG_URL: db.url,
      SINK_URL: `${worker}/v1/ingest`,
      SINK_TOKEN: ingest,
      LOG_LEVEL: 'warn',
    })
    const committed = new Map<string, number>()
    for (let index = 0; index < N.e2e; index += 1) {
      const { eventId, inbound } = event()
      await db.sql.begin(async (tx) => {
        await tx`INSERT INTO data_exchange.message_queue_log (message_id) VALUES (${eventId})`
        await tx`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body) VALUES (${eventId}, ${Buffer.from(inbound.body)})`
      })
      committed.set(eventId, Date.now())
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const endToEnd: number[] = []
    for (const [eventId, at] of committed) {
      const sent = await waitFor(
        async () => {
          const story = (await (
            await fetch(`${worker}/v1/events/${eventId}`, { headers: { authorization: `Bearer ${adminToken}` } })
          ).json()) as { notifications?: { sentAt: string | null }[] }
          return story.notifications?.[0]?.sentAt ?? undefined
        },
        'the email',
        120_000,
      )
      endToEnd.push(Date.parse(sent) - at)
    }
    await relay.stop()
    results.end_to_end = { p50_ms: percentile(endToEnd, 50), p99_ms: percentile(endToEnd, 99), events: N.e2e }
  } finally {
    await local.stop()
    await db.drop()
  }
}

const started = Date.now()
let failed = false
for (const [name, bench] of [
  ['pg_relay', benchPostgres],
  ['rabbitmq_relay', benchRabbit],
  ['kafka_relay', benchKafka],
  ['worker_pipeline + end_to_end', benchWorker],
] as const) {
  try {
    await bench()
  } catch (error) {
    progress(`${name} failed: ${(error as Error).message}`)
    results[name] = { error: (error as Error).message }
    failed = true
  }
}
const machine = {
  cpus: cpus().length,
  cpu_model: cpus()[0]?.model,
  memory_gb: Math.round(totalmem() / 2 ** 30),
  node: process.version,
  scale: SCALE,
}
writeFileSync(
  'bench/results.json',
  `${JSON.stringify({ ran_at: new Date().toISOString(), seconds: Math.round((Date.now() - started) / 1000), machine, ...results }, null, 2)}\n`,
)
const rows: string[][] = []
for (const [bench, values] of Object.entries(results)) {
  for (const [key, value] of Object.entries(values))
    rows.push([bench, key, typeof value === 'object' ? JSON.stringify(value) : String(value)])
}
console.log(`\n${renderTable(['BENCH', 'KEY', 'VALUE'], rows)}\n\nwritten to bench/results.json`)
// A bench that failed is a failed run, whatever the others measured.
process.exit(failed ? 1 : 0)
