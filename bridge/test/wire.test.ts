/**
 * What the bridge puts on the wire always passes the ingest route's own schema
 * and size limit, whatever the source held: the promise that no single event
 * can stall a source rests on it.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  INBOUND_EVENT_MAX_BYTES,
  type InboundEvent,
  InboundEventSchema,
  MarkerBodySchema,
} from '@notify-edge/contracts'
import fc from 'fast-check'
import { markerFor } from '../src/sink/marker.ts'
import { boundedId, HEADERS_CUT, wireSafe, wireSize } from '../src/sink/wire.ts'
import { BASE64_HEADERS, payloadOf, stringHeaders } from '../src/sources/payload.ts'

/** Hostile text: any code units (lone surrogates, NUL, controls), sometimes very long. */
const hostile = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 700 }),
  fc.constantFrom('', ' ', '\u0000', '\ud800', '\udfff x', '__proto__', 'constructor'),
  fc.integer({ min: 1, max: 200_000 }).map((length) => '\u0001'.repeat(length)),
  fc.integer({ min: 1, max: 3000 }).map((length) => '𝒳'.repeat(length)),
)

const hostileEvent: fc.Arbitrary<InboundEvent> = fc.record({
  source: fc.constantFrom('postgres', 'rabbitmq', 'kafka', 'http'),
  origin: hostile,
  sourceMessageId: hostile,
  receivedAt: fc.constant(new Date().toISOString()),
  headers: fc.dictionary(hostile, hostile, { maxKeys: 120 }),
  body: fc.oneof(
    hostile,
    fc.uint8Array({ maxLength: 300_000 }).map((bytes) => Buffer.from(bytes).toString('base64')),
  ),
  encoding: fc.constantFrom(undefined, 'utf8', 'base64'),
})

test('every marker passes the route schema and fits a queue message, whatever the original held', () => {
  fc.assert(
    fc.property(
      hostileEvent,
      fc.constantFrom('payload-too-large', 'rejected-by-ingest'),
      fc.option(hostile),
      fc.boolean(),
      (event, kind, reason, minimal) => {
        const marker = markerFor(event, kind, { reason: reason ?? undefined, minimal })
        const parsed = InboundEventSchema.safeParse(JSON.parse(JSON.stringify(marker)))
        assert.ok(parsed.success, parsed.success ? '' : parsed.error.message)
        assert.ok(wireSize(marker) <= INBOUND_EVENT_MAX_BYTES, `marker of ${wireSize(marker)} bytes`)
        assert.ok(MarkerBodySchema.safeParse(JSON.parse(marker.body)).success)
      },
    ),
    { numRuns: 300 },
  )
})

test('a wire-safe event passes the route schema, and its payload is untouched', () => {
  fc.assert(
    fc.property(hostileEvent, (event) => {
      const safe = wireSafe(event)
      const parsed = InboundEventSchema.safeParse(JSON.parse(JSON.stringify(safe)))
      assert.ok(parsed.success, parsed.success ? '' : parsed.error.message)
      assert.equal(safe.body, event.body)
      assert.equal(safe.encoding, event.encoding)
    }),
    { numRuns: 300 },
  )
})

test('a long id keeps its beginning and the sha256 of the whole; two long ids that share 600 characters stay apart', () => {
  const a = `${'a'.repeat(600)}-first`
  const b = `${'a'.repeat(600)}-second`
  const boundedA = boundedId(a, 512, 'x')
  assert.equal(boundedA.length <= 512, true)
  assert.match(boundedA, /^a+…sha256:[0-9a-f]{64}$/)
  assert.notEqual(boundedA, boundedId(b, 512, 'x'))
  assert.equal(boundedId('', 512, 'fallback'), 'fallback')
  assert.equal(boundedId('short', 512, 'x'), 'short')
})

test('headers past the limits are cut or dropped, with a count and the digest of the originals', () => {
  const headers = Object.fromEntries(Array.from({ length: 100 }, (_, index) => [`h${index}`, 'v'.repeat(5000)]))
  const safe = wireSafe({
    source: 'kafka',
    origin: 'kafka:t/0@1',
    sourceMessageId: 'id',
    receivedAt: new Date().toISOString(),
    headers,
    body: '{}',
  })
  assert.ok(Object.keys(safe.headers).length <= 65)
  assert.match(safe.headers[HEADERS_CUT] ?? '', /^100 cut or dropped; sha256 of the original headers [0-9a-f]{64}$/)
})

test('payloads keep their exact bytes: a byte-order mark stays, invalid UTF-8 goes as base64; binary headers go as base64', () => {
  const bom = Buffer.from('\ufeff{"n": 12345678901234567890}', 'utf8')
  assert.deepEqual(Buffer.from(payloadOf(bom).body, 'utf8'), bom)
  const binary = Buffer.from([0x7b, 0xff, 0xfe, 0x7d])
  assert.deepEqual(payloadOf(binary), { body: binary.toString('base64'), encoding: 'base64' })
  const headers = stringHeaders({ 'Message-Id': Buffer.from([0xff, 0x00, 0x01]), ok: Buffer.from('text') })
  assert.equal(headers['message-id'], Buffer.from([0xff, 0x00, 0x01]).toString('base64'))
  assert.equal(headers.ok, 'text')
  assert.equal(headers[BASE64_HEADERS], 'message-id')
})
