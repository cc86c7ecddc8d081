/**
 * Fuzzing the contracts, the ingest route and the notify-events consumer with
 * fast-check: generated and mutated payloads (missing and wrong-typed fields,
 * oversized strings, deep nesting, invalid UTF-8, huge numbers,
 * prototype-pollution keys) never produce a 500 or a throwing handler; each
 * ends as a 4xx naming the problem or a dead letter naming the field, and the
 * valid events mixed in are all delivered.
 */
import { env } from 'cloudflare:workers'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { InboundEvent } from '../src/contracts/index.ts'
import { decodeInbound } from '../src/events/decode-inbound.ts'
import {
  deliverBatch,
  eventually,
  examples,
  freshInbound,
  INGEST_TOKEN,
  inbound,
  notificationsOf,
  seedContact,
} from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const SEED = 20261129

/** JSON values that break things: deep nesting, huge numbers, pollution keys, odd strings. */
const nasty = fc.oneof(
  fc.constantFrom(
    null,
    true,
    0,
    -1,
    1e308,
    -1e308,
    Number.MAX_SAFE_INTEGER + 2,
    0.1,
    '',
    ' ',
    '\u0000',
    'x'.repeat(5000),
  ),
  fc.string(),
  fc.integer(),
  fc.double({ noNaN: true }),
  fc.array(fc.anything(), { maxLength: 3 }),
  fc.dictionary(
    fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'email', 'eventId'),
    fc.anything(),
    { maxKeys: 3 },
  ),
  fc.constant(JSON.parse('{"__proto__": {"polluted": true}}')),
  fc.integer({ min: 1, max: 60 }).map((depth) => {
    let value: unknown = 'deep'
    for (let level = 0; level < depth; level += 1) value = { nested: value }
    return value
  }),
)

/** Every path (as key lists) of a JSON object. */
function paths(value: unknown, prefix: string[] = []): string[][] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [prefix]
  return [prefix, ...Object.entries(value).flatMap(([key, child]) => paths(child, [...prefix, key]))]
}

/** A sample with one path deleted or replaced. */
const mutated = fc
  .record({
    sample: fc.constantFrom(...examples()),
    pathIndex: fc.nat(),
    remove: fc.boolean(),
    replacement: nasty,
  })
  .map(({ sample, pathIndex, remove, replacement }) => {
    const value = structuredClone(sample.value)
    const all = paths(value).filter((path) => path.length > 0)
    const path = all[pathIndex % all.length] as string[]
    let node = value as Record<string, unknown>
    for (const key of path.slice(0, -1)) node = node[key] as Record<string, unknown>
    const last = path.at(-1) as string
    if (remove) delete node[last]
    else node[last] = replacement
    return { event: inbound(value, sample.headers), path: path.join('.') }
  })

/** Raw bodies: truncated JSON, invalid UTF-8 as base64, non-objects. */
const rawBodies = fc.oneof(
  fc.string().map((body) => ({ ...inbound({}), body })),
  fc
    .uint8Array({ minLength: 1, maxLength: 64 })
    .map((bytes) => ({ ...inbound({}), body: btoa(String.fromCharCode(...bytes)), encoding: 'base64' as const })),
  nasty.map((value) => ({ ...inbound({}), body: JSON.stringify(value) ?? 'null' })),
)

describe('fuzzing', () => {
  it('10,000 mutated and generated payloads: the decoder never throws; every invalid one names a field', () => {
    let invalid = 0
    fc.assert(
      fc.property(
        fc.oneof({ weight: 3, arbitrary: mutated.map((m) => m.event) }, { weight: 1, arbitrary: rawBodies }),
        (event) => {
          const decoded = decodeInbound(event)
          expect(['valid', 'ignored', 'invalid']).toContain(decoded.status)
          if (decoded.status === 'invalid') {
            invalid += 1
            expect(decoded.issues.length).toBeGreaterThan(0)
            for (const issue of decoded.issues) expect(issue.field).toMatch(/\S/)
            expect(decoded.message).toContain(decoded.issues[0]?.field)
          }
        },
      ),
      { numRuns: 10_000, seed: SEED },
    )
    expect(invalid).toBeGreaterThan(1000)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('1,000 fuzzed ingest requests: never a 500; each refusal is a 4xx with a code and the problem named', async () => {
    const requests = fc.oneof(
      fc.string().map((text) => text),
      nasty.map((value) => JSON.stringify({ events: value })),
      fc
        .array(
          fc.oneof(
            mutated.map((m) => m.event as unknown),
            nasty,
          ),
          { minLength: 1, maxLength: 5 },
        )
        .map((events) => JSON.stringify({ events })),
      fc
        .array(
          fc.record({
            source: nasty,
            origin: nasty,
            sourceMessageId: nasty,
            receivedAt: nasty,
            headers: nasty,
            body: nasty,
          }),
          { minLength: 1, maxLength: 3 },
        )
        .map((events) => JSON.stringify({ events })),
    )
    const samples = fc.sample(requests, { numRuns: 1000, seed: SEED })
    const statuses = new Map<number, number>()
    for (const body of samples) {
      const response = await fetchWorker('/v1/ingest', {
        method: 'POST',
        headers: { authorization: `Bearer ${INGEST_TOKEN}`, 'content-type': 'application/json' },
        body,
      })
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
      expect([202, 400, 413]).toContain(response.status)
      const json = (await response.json()) as {
        accepted?: number
        error?: { code: string; message: string; issues?: { field: string }[] }
      }
      if (response.status !== 202) {
        expect(json.error?.code).toMatch(/^(INVALID_JSON|INVALID_REQUEST|PAYLOAD_TOO_LARGE)$/)
        expect(json.error?.message).toBeTruthy()
        if (json.error?.code === 'INVALID_REQUEST') expect(json.error.issues?.[0]?.field).toBeTruthy()
      }
    }
    expect(statuses.get(202)).toBeGreaterThan(0)
    expect(statuses.get(400)).toBeGreaterThan(0)
  })

  it('2,000 fuzzed events through the consumer: no throw; invalid ones are dead letters naming the field; valid ones mixed in are delivered', async () => {
    // The samples' PIN recipients have contacts, so a mutation that stays valid is processed, not retried.
    await seedContact('0c0e2d2a-5c71-4a3f-8a2f-7e9c1b3d4a55')
    await seedContact('7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2903')
    const bad = fc.sample(
      fc.oneof(
        mutated,
        rawBodies.map((event) => ({ event, path: 'body' })),
      ),
      { numRuns: 2000, seed: SEED },
    )
    // Each to an owner of its own: responses to one owner would be told in one digest, not one email each.
    const good: InboundEvent[] = Array.from({ length: 20 }, () => freshInbound('response.created'))
    const all = [...bad.map((item) => item.event), ...good]
    for (let start = 0; start < all.length; start += 100) {
      const result = await deliverBatch(
        all.slice(start, start + 100).map((body, index) => ({ id: `f${start + index}`, attempts: 1, body })),
      )
      // Everything is settled: acked (processed, ignored or dead-lettered); D1 is up, so nothing is retried.
      expect(result.explicitAcks.length + result.retryMessages.length).toBe(Math.min(100, all.length - start))
      expect(result.retryMessages).toEqual([])
    }
    const invalid = bad.filter((item) => decodeInbound(item.event).status === 'invalid')
    const sampled = invalid.slice(0, 50)
    await eventually(async () => {
      for (const item of sampled) {
        const row = await env.DB.prepare('SELECT code, error FROM dead_letters WHERE source_message_id = ?1')
          .bind(item.event.sourceMessageId)
          .first<{ code: string; error: string }>()
        expect(row?.code).toBe('NTF_INVALID_PAYLOAD')
        const decoded = decodeInbound(item.event)
        if (decoded.status === 'invalid') expect(row?.error).toContain(decoded.issues[0]?.field)
      }
    }, 60_000)
    for (const event of good) {
      const eventId = JSON.parse(event.body).envelope.eventId
      await eventually(async () => expect((await notificationsOf(eventId))[0]?.status).toBe('sent'))
    }
  })
})
