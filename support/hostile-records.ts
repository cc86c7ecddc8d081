/**
 * Records a careless or hostile producer writes — bad ids, oversized and
 * binary headers, empty, non-UTF-8 and oversized bodies, JSON that a parser
 * would rewrite — for each source, each followed by a valid event on the same
 * outbox / queue / partition. The adversarial test and `npm run chaos` publish
 * them and check three promises: each bad record ends where an operator sees
 * it (a dead letter with its code, or delivered when only its metadata was
 * odd), the valid event behind it still arrives (no stall), and a dead
 * letter's body is the published bytes (nothing rewritten).
 */
import { readFileSync } from 'node:fs'
import type { Producer } from 'kafkajs'
import type postgres from 'postgres'
import type { Publisher } from 'rabbitmq-client'

/** The three sources of the bridge. */
export type Source = 'postgres' | 'rabbitmq' | 'kafka'

/** What must become of a record. */
export type Expectation = { deadLetter: string } | { emailTo: string }

/** One record as published. */
export type HostileRecord = {
  name: string
  source: Source
  /** The payload bytes as published; null is a Kafka tombstone or an outbox row without its data row. */
  body: Buffer | null
  /** What the dead letter can be found by: the body's eventId, else the record's own message id. */
  lookup: string
  /** RabbitMQ properties. */
  amqp?: { messageId?: string; contentType?: string; headers?: Record<string, unknown> }
  /** Kafka record headers. */
  kafka?: Record<string, string | Buffer>
  /** For the outbox: the row's message_id. */
  outboxId?: string
  expect: Expectation
}

const sample = JSON.parse(readFileSync(new URL('../examples/arthunt/response.created.json', import.meta.url), 'utf8'))

/**
 * A valid ArtHunt response.created whose email goes to `to`, to an owner of
 * its own: responses to one owner are told in one digest, one email for all.
 */
export function validEvent(eventId: string, to: string): Buffer {
  const body = structuredClone(sample)
  body.envelope.eventId = eventId
  body.data.recipient.userId = crypto.randomUUID()
  body.data.recipient.email = to
  return Buffer.from(JSON.stringify(body))
}

/** JSON a parse-and-serialise round trip would change: unsafe integers, odd spacing, escapes, and no contract. */
function rewritableJson(eventId: string): Buffer {
  return Buffer.from(
    `{ "envelope" : { "eventId":"${eventId}", "eventType" : "response.created" },\n\t"n": 12345678901234567890123,` +
      ` "f": 1.0e2, "s": "\\u00e9\\/x", "big": -9007199254740993 }`,
  )
}

const NOT_UTF8 = Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x00, 0x22, 0x7d])

/** A body of 200 KB: more than one queue message holds. */
function oversized(eventId: string): Buffer {
  return Buffer.from(JSON.stringify({ envelope: { eventId }, padding: 'x'.repeat(200_000) }))
}

/** The bad records of one source, with fresh ids and addresses for `tag`. */
export function hostileRecords(source: Source, tag: string): HostileRecord[] {
  const id = () => crypto.randomUUID()
  const to = (name: string) => `hostile+${tag}-${name}-${id().slice(0, 8)}@example.com`
  const records: HostileRecord[] = []
  const add = (record: Omit<HostileRecord, 'source'>) => records.push({ ...record, source })

  // Bodies: the same on every source.
  const bodies: { name: string; body: (eventId: string) => Buffer; code: string; byEventId: boolean }[] = [
    { name: 'empty body', body: () => Buffer.alloc(0), code: 'NTF_INVALID_PAYLOAD', byEventId: false },
    { name: 'non-UTF-8 body', body: () => NOT_UTF8, code: 'NTF_INVALID_PAYLOAD', byEventId: false },
    { name: 'oversized body', body: oversized, code: 'NTF_PAYLOAD_TOO_LARGE', byEventId: false },
    { name: 'JSON a parser would rewrite', body: rewritableJson, code: 'NTF_INVALID_PAYLOAD', byEventId: true },
  ]
  for (const { name, body, code, byEventId } of bodies) {
    const eventId = id()
    const messageId = id()
    add({
      name,
      body: body(eventId),
      lookup: byEventId ? eventId : messageId,
      amqp: { messageId, contentType: name.startsWith('JSON') ? 'application/json' : undefined },
      kafka: { 'message-id': messageId },
      outboxId: messageId,
      expect: { deadLetter: code },
    })
  }
  const bomEvent = id()
  const bomTo = to('bom')
  add({
    name: 'a byte-order mark before a valid event',
    body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), validEvent(bomEvent, bomTo)]),
    lookup: bomEvent,
    amqp: { messageId: id(), contentType: 'application/json' },
    kafka: { 'message-id': id() },
    outboxId: id(),
    expect: { emailTo: bomTo },
  })

  const oddMetadata: Pick<HostileRecord, 'name' | 'amqp' | 'kafka'>[] = []
  if (source === 'postgres') {
    const missing = id()
    add({
      name: 'no data row',
      body: null,
      lookup: missing,
      outboxId: missing,
      expect: { deadLetter: 'NTF_INVALID_PAYLOAD' },
    })
  }

  if (source === 'rabbitmq') {
    const text = id()
    add({
      name: 'text/plain that is not UTF-8',
      body: NOT_UTF8,
      lookup: text,
      amqp: { messageId: text, contentType: 'text/plain' },
      expect: { deadLetter: 'NTF_INVALID_PAYLOAD' },
    })
    oddMetadata.push(
      { name: 'empty message-id', amqp: { messageId: '' } },
      { name: 'message-id with control characters', amqp: { messageId: `\u0000\u0001bad\u007f${id()}` } },
      { name: 'a 100 KB header', amqp: { messageId: id(), headers: { 'x-huge': 'h'.repeat(100_000) } } },
      {
        name: '300 headers',
        amqp: { messageId: id(), headers: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`x-h${i}`, i])) },
      },
      { name: 'a binary header', amqp: { messageId: id(), headers: { 'x-binary': Buffer.from([0xff, 0x00, 0xfe]) } } },
    )
  }

  if (source === 'kafka') {
    const tombstone = id()
    add({
      name: 'tombstone (no value)',
      body: null,
      lookup: tombstone,
      kafka: { 'message-id': tombstone },
      expect: { deadLetter: 'NTF_INVALID_PAYLOAD' },
    })
    const pinLong = `${id()}${'p'.repeat(564)}`
    add({
      name: 'PIN event whose message-id is 600 characters',
      body: Buffer.from(JSON.stringify({ PersonId: id(), UserId: id(), VerificationStatus: null })),
      // Dead letters keep the first 200 characters of an id they cannot use.
      lookup: pinLong.slice(0, 200),
      kafka: { 'message-id': pinLong, 'event-type': 'person-upserted', 'contract-version': '1' },
      expect: { deadLetter: 'NTF_INVALID_PAYLOAD' },
    })
    oddMetadata.push(
      { name: 'empty message-id', kafka: { 'message-id': '' } },
      { name: 'message-id of 600 characters', kafka: { 'message-id': `${'m'.repeat(590)}${id().slice(0, 10)}` } },
      { name: 'binary message-id', kafka: { 'message-id': Buffer.from([0xff, 0xfe, 0x00, ...Buffer.from(id())]) } },
      { name: 'a 200 KB header', kafka: { 'message-id': id(), 'x-huge': 'h'.repeat(200_000) } },
      {
        name: '300 headers',
        kafka: {
          'message-id': id(),
          ...Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`x-h${i}`, `${i}`])),
        },
      },
    )
  }

  // Valid events whose only fault is their metadata: delivered, their ids and headers made wire-safe.
  for (const { name, amqp, kafka } of oddMetadata) {
    const eventId = id()
    const address = to(name.replaceAll(/\W+/g, '-'))
    add({ name, body: validEvent(eventId, address), lookup: eventId, amqp, kafka, expect: { emailTo: address } })
  }
  return records
}

/** A valid event to publish right behind a bad record, on the same outbox / queue / partition: it must arrive. */
export function validRecord(source: Source, tag: string): HostileRecord {
  const eventId = crypto.randomUUID()
  const to = `valid+${tag}-${eventId.slice(0, 8)}@example.com`
  return {
    name: 'valid event behind a bad record',
    source,
    body: validEvent(eventId, to),
    lookup: eventId,
    amqp: { messageId: eventId },
    kafka: { 'message-id': eventId },
    outboxId: eventId,
    expect: { emailTo: to },
  }
}

/** Writes an outbox row as a producer would (log row and data row in one transaction). */
export async function writeOutboxRow(sql: postgres.Sql, schema: string, messageId: string, body: Buffer | null) {
  await sql.begin(async (tx) => {
    await tx`INSERT INTO ${tx(schema)}.message_queue_log (message_id) VALUES (${messageId})`
    if (body !== null) {
      await tx`INSERT INTO ${tx(schema)}.message_queue_log_data (message_id, message_body) VALUES (${messageId}, ${body})`
    }
  })
}

/** Publishes a record as a producer would. */
export async function publishHostile(
  record: HostileRecord,
  to: {
    sql?: postgres.Sql
    schema?: string
    publisher?: Publisher
    exchange?: string
    producer?: Producer
    topic?: string
    partition?: number
  },
): Promise<void> {
  if (record.source === 'postgres') {
    await writeOutboxRow(
      to.sql as postgres.Sql,
      to.schema ?? 'data_exchange',
      record.outboxId ?? crypto.randomUUID(),
      record.body,
    )
  } else if (record.source === 'rabbitmq') {
    await (to.publisher as Publisher).send(
      {
        exchange: to.exchange,
        routingKey: 'notifications.email.response.created',
        durable: true,
        mandatory: true,
        ...record.amqp,
      },
      record.body ?? Buffer.alloc(0),
    )
  } else {
    await (to.producer as Producer).send({
      topic: to.topic as string,
      messages: [{ partition: to.partition ?? 0, key: 'hostile', value: record.body, headers: record.kafka }],
    })
  }
}

/** A dead letter as the operator API shows it, with the payload bytes it keeps. */
export type DeadLetterSeen = { id: string; code: string; origin: string; bytes: Buffer }

/**
 * The first dead letter of the event or message `lookup` (`GET /v1/events/:id`),
 * with its body as bytes, or undefined while there is none. `request` is the
 * local Worker's checked fetch (LocalWorker#request).
 */
export async function deadLetterOf(
  request: (path: string, init?: RequestInit) => Promise<Response>,
  adminToken: string,
  lookup: string,
): Promise<DeadLetterSeen | undefined> {
  const get = async (path: string) => {
    const response = await request(path, { headers: { authorization: `Bearer ${adminToken}` } })
    return { status: response.status, body: (await response.json()) as Record<string, unknown> }
  }
  const story = await get(`/v1/events/${encodeURIComponent(lookup)}`)
  const [first] = story.status === 200 ? (story.body.deadLetters as { id: string }[]) : []
  if (!first) return undefined
  const { body } = await get(`/v1/dead-letters/${first.id}`)
  const original = body.body as { body: string; encoding?: string; origin: string }
  return {
    id: first.id,
    code: body.code as string,
    origin: original.origin,
    bytes: Buffer.from(original.body, original.encoding === 'base64' ? 'base64' : 'utf8'),
  }
}
