/**
 * Hostile records through every source into a real `wrangler dev`: each bad
 * record is followed by a valid event on the same outbox / queue / partition,
 * which must still be emailed (nothing stalls); each bad record ends as a dead
 * letter with its code, or is delivered when only its metadata was odd; a dead
 * letter's body is the published bytes (nothing rewritten); and the original
 * of a record that travelled as a marker stays at its source.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { after, before, test } from 'node:test'
import { promisify } from 'node:util'
import { type Admin, Kafka, logLevel, Partitioners, type Producer } from 'kafkajs'
import postgres from 'postgres'
import { Connection, type Publisher } from 'rabbitmq-client'
import { migratePostgres } from '../../bridge/src/migrate.ts'
import { startBridge } from '../../support/bridge-process.ts'
import { assertNoLeaks } from '../../support/child-output.ts'
import {
  deadLetterOf,
  type HostileRecord,
  hostileRecords,
  publishHostile,
  type Source,
  validRecord,
} from '../../support/hostile-records.ts'
import { type LocalWorker, sentMails, startLocalWorker } from '../../support/local-worker.ts'
import { waitFor } from '../../support/wait.ts'

const run = promisify(execFile)
const id = crypto.randomUUID().slice(0, 8)
const ADMIN = 'adversarial-admin-token-0123'
const INGEST = 'adversarial-ingest-token-0123'
const PG_ADMIN = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const DATABASE = `notify_edge_adversarial_${id}`
const PG_URL = PG_ADMIN.replace(/\/[^/]*$/, `/${DATABASE}`)
const RABBIT_URL = process.env.TEST_RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const BROKERS = (process.env.TEST_KAFKA_BROKERS ?? '127.0.0.1:9092').split(',')
const names = {
  exchange: `adv.notifications.${id}`,
  queue: `adv.email.${id}`,
  dlq: `adv.email.${id}.dlq`,
  topic: `adv.pin.${id}`,
}

let worker: LocalWorker
let bridge: Awaited<ReturnType<typeof startBridge>>
let sql: postgres.Sql
let rabbit: Connection
let publisher: Publisher
let admin: Admin
let producer: Producer

const until = <T>(check: () => Promise<T | undefined>, what: string) => waitFor(check, what, 120_000)

async function mailedTo(): Promise<Set<string>> {
  return new Set((await sentMails(worker.url)).flatMap((mail) => mail.to))
}

before(async () => {
  await run('bash', ['scripts/services-up.sh'])
  const pgAdmin = postgres(PG_ADMIN, { max: 1, onnotice: () => {} })
  await pgAdmin.unsafe(`CREATE DATABASE ${DATABASE}`)
  await pgAdmin.end({ timeout: 1 })
  await migratePostgres(PG_URL)
  sql = postgres(PG_URL, { max: 2, onnotice: () => {} })
  // A producer with the broker's frame size (131,072), as most clients have: it can publish a 100 KB header.
  rabbit = new Connection({ url: RABBIT_URL, connectionName: 'adversarial-publisher', frameMax: 131_072 })
  publisher = rabbit.createPublisher({ confirm: true, maxAttempts: 5 })
  const kafka = new Kafka({ clientId: 'adversarial', brokers: BROKERS, logLevel: logLevel.NOTHING })
  admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: names.topic, numPartitions: 3 }], waitForLeaders: true })
  producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
  await producer.connect()

  worker = await startLocalWorker({ ADMIN_TOKEN: ADMIN, INGEST_TOKEN: INGEST })
  bridge = await startBridge({
    SINK_URL: `${worker.url}/v1/ingest`,
    SINK_TOKEN: INGEST,
    PG_URL,
    // The outbox row without a data row is dead-lettered after this wait for its data.
    PG_DATA_WAIT_MS: '2000',
    RABBITMQ_URL: RABBIT_URL,
    RABBITMQ_DECLARE: 'true',
    RABBITMQ_EXCHANGE: names.exchange,
    RABBITMQ_QUEUE: names.queue,
    RABBITMQ_DLQ: names.dlq,
    KAFKA_BROKERS: BROKERS.join(','),
    KAFKA_TOPICS: names.topic,
    KAFKA_GROUP_ID: `adversarial-${id}`,
  })
  // Ready means every source is consuming: the queue and its bindings exist before anything is published.
  await until(async () => ((await fetch(`http://127.0.0.1:${bridge.port}/readyz`)).ok ? true : undefined), 'the bridge')
})

after(async () => {
  await bridge?.stop()
  await worker?.stop()
  await publisher?.close()
  await rabbit?.queueDelete({ queue: names.queue }).catch(() => {})
  await rabbit?.queueDelete({ queue: names.dlq }).catch(() => {})
  await rabbit?.exchangeDelete({ exchange: names.exchange }).catch(() => {})
  await rabbit?.close()
  await producer?.disconnect()
  await admin?.deleteTopics({ topics: [names.topic] }).catch(() => {})
  await admin?.disconnect()
  await sql?.end({ timeout: 1 })
  const pgAdmin = postgres(PG_ADMIN, { max: 1, onnotice: () => {} })
  await pgAdmin.unsafe(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`)
  await pgAdmin.end({ timeout: 1 })
})

/** Publishes each bad record followed by a valid event on the same outbox / queue / partition. */
async function publishAll(source: Source) {
  const records = hostileRecords(source, `${source}-${id}`)
  const valid: string[] = []
  for (const record of records) {
    const behind = validRecord(source, `${source}-${id}`)
    for (const next of [record, behind]) {
      await publishHostile(next, {
        sql,
        publisher,
        exchange: names.exchange,
        producer,
        topic: names.topic,
        partition: 0,
      })
    }
    if ('emailTo' in behind.expect) valid.push(behind.expect.emailTo)
  }
  return { records, valid }
}

/** The dead letter of a record, once it is there. */
function deadLetter(record: HostileRecord) {
  return until(
    () => deadLetterOf(worker.request, ADMIN, record.lookup),
    `the dead letter of "${record.name}" (${record.source})`,
  )
}

for (const source of ['postgres', 'rabbitmq', 'kafka'] as const) {
  test(`${source}: every bad record ends visible, the valid event behind each one arrives, dead letters hold the published bytes`, async () => {
    const { records, valid } = await publishAll(source)
    const delivered = records.flatMap((record) => ('emailTo' in record.expect ? [record.expect.emailTo] : []))
    const expected = [...valid, ...delivered]
    await until(async () => {
      const have = await mailedTo()
      return expected.every((to) => have.has(to)) ? true : undefined
    }, `all ${expected.length} emails of ${source}`)

    for (const record of records) {
      if (!('deadLetter' in record.expect)) continue
      const letter = await deadLetter(record)
      assert.equal(letter.code, record.expect.deadLetter, record.name)
      if (letter.code === 'NTF_PAYLOAD_TOO_LARGE') continue
      // Bytes in, bytes out: what the operator inspects and replays is what the producer wrote.
      assert.deepEqual(letter.bytes, record.body ?? Buffer.alloc(0), `${record.name}: the dead letter's body differs`)
    }

    // The originals of records that travelled as markers stay at their source.
    const oversized = records.find((record) => record.name === 'oversized body') as HostileRecord
    const marker = await deadLetter(oversized)
    if (source === 'postgres') {
      const [row] =
        await sql`SELECT l.transferred, l.forwarded_as, d.message_body FROM data_exchange.message_queue_log l
        JOIN data_exchange.message_queue_log_data d USING (message_id) WHERE l.message_id = ${oversized.outboxId as string}`
      assert.equal(row?.transferred, true)
      assert.equal(row?.forwarded_as, 'marker:payload-too-large')
      assert.deepEqual(Buffer.from(row?.message_body), oversized.body)
      assert.match(marker.origin, /^postgres:data_exchange\.message_queue_log\/[0-9a-f-]{36}$/)
    } else if (source === 'rabbitmq') {
      assert.equal(marker.origin, `rabbitmq:${names.dlq}`)
      const kept = await until(
        async () => (await rabbit.basicGet({ queue: names.dlq, noAck: true })) ?? undefined,
        'the original in the dead-letter queue',
      )
      assert.equal(kept.messageId, oversized.amqp?.messageId)
      assert.deepEqual(kept.body, oversized.body)
      const counts = await rabbit.queueDeclare({ queue: names.queue, passive: true })
      assert.equal(counts.messageCount, 0)
    } else {
      assert.match(marker.origin, new RegExp(`^kafka:${names.topic.replaceAll('.', '\\.')}/0@\\d+$`))
      // Nothing stalled the partition: the group's offset reaches its end.
      const end = (await admin.fetchTopicOffsets(names.topic)).find((p) => p.partition === 0)?.high
      await until(async () => {
        const [committed] = await admin.fetchOffsets({ groupId: `adversarial-${id}`, topics: [names.topic] })
        return committed?.partitions.find((p) => p.partition === 0)?.offset === end ? true : undefined
      }, 'partition 0 committed to its end')
    }
  })
}

// Nothing the child processes of this file printed may carry personal data.
after(() => assertNoLeaks())
