/** The sink against a local HTTP server standing in for the Worker's ingest route. */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, test } from 'node:test'
import { INBOUND_EVENT_MAX_BYTES, type InboundEvent } from '@notify-edge/contracts'
import { leaksIn } from '../../support/privacy.ts'
import { waitFor } from '../../support/wait.ts'
import { createLogger } from '../src/log.ts'
import { createMetrics } from '../src/metrics.ts'
import { Sink } from '../src/sink/sink.ts'

type Handler = (
  events: InboundEvent[],
  request: number,
) => { status: number; body?: unknown; raw?: string; type?: string; headers?: Record<string, string> }

const servers: ReturnType<typeof createServer>[] = []
after(() => {
  for (const server of servers) {
    server.closeAllConnections()
    server.close()
  }
})

async function server(handler: Handler) {
  const seen: { at: number; events: InboundEvent[] }[] = []
  const http = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    const { events } = JSON.parse(Buffer.concat(chunks).toString()) as { events: InboundEvent[] }
    seen.push({ at: performance.now(), events })
    const answer = handler(events, seen.length)
    response.writeHead(answer.status, { 'content-type': answer.type ?? 'application/json', ...answer.headers })
    response.end(answer.raw ?? JSON.stringify(answer.body ?? {}))
  })
  servers.push(http)
  http.listen(0, '127.0.0.1')
  await once(http, 'listening')
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/v1/ingest`
  const sink = new Sink(
    { url, token: 't', concurrency: 2, lingerMs: 1, timeoutMs: 5000 },
    createLogger('silent'),
    createMetrics(),
  )
  return { sink, seen }
}

function event(body: string, id: string = crypto.randomUUID()): InboundEvent {
  return {
    source: 'http',
    origin: `test:${id}`,
    sourceMessageId: id,
    receivedAt: new Date().toISOString(),
    headers: {},
    body,
  }
}

const accept: Handler = (events) => ({ status: 202, body: { accepted: events.length } })

test('a payload too large for a queue message travels as a payload-too-large marker', async () => {
  const { sink, seen } = await server(accept)
  const big = event(JSON.stringify({ padding: 'x'.repeat(INBOUND_EVENT_MAX_BYTES) }))
  await sink.send([big, event('{}')])
  const [sent] = seen.flatMap((request) => request.events).filter((e) => e.sourceMessageId === big.sourceMessageId)
  const marker = JSON.parse(sent?.body ?? '{}')
  assert.equal(marker.notifyEdgeMarker, 'payload-too-large')
  assert.equal(marker.size, Buffer.byteLength(big.body))
  assert.match(marker.sha256, /^[0-9a-f]{64}$/)
  assert.equal(marker.head, big.body.slice(0, 1024))
})

test('an event the route refuses by index is replaced by a marker; the others go as they were', async () => {
  const { sink, seen } = await server((events, request) =>
    request === 1
      ? {
          status: 400,
          body: {
            error: {
              code: 'INVALID_REQUEST',
              message: 'bad',
              issues: [{ index: 1, field: 'events[1].receivedAt', message: 'Invalid ISO datetime' }],
            },
          },
        }
      : { status: 202, body: { accepted: events.length } },
  )
  const events = [event('{"a":1}'), event('{"b":2}'), event('{"c":3}')]
  await sink.send(events)
  assert.equal(seen.length, 2)
  const resent = seen[1]?.events ?? []
  assert.deepEqual(resent[0], events[0])
  assert.deepEqual(resent[2], events[2])
  const marker = JSON.parse(resent[1]?.body ?? '{}')
  assert.equal(marker.notifyEdgeMarker, 'rejected-by-ingest')
  assert.match(marker.reason, /events\[1\]\.receivedAt: Invalid ISO datetime/)
  assert.equal(resent[1]?.sourceMessageId, events[1]?.sourceMessageId)
})

test("a refusal that names no event (a proxy's HTML 413, our error without an index) is retried, never turned into markers", async () => {
  const { sink, seen } = await server((events, request) =>
    request === 1
      ? { status: 413, raw: '<html><body>413 Request Entity Too Large</body></html>', type: 'text/html' }
      : request === 2
        ? { status: 400, body: { error: { code: 'INVALID_JSON', message: 'request body is not JSON' } } }
        : { status: 202, body: { accepted: events.length } },
  )
  const events = [event('{"a":1}'), event('{"b":2}')]
  const deliveries = await sink.send(events)
  assert.equal(seen.length, 3)
  assert.deepEqual(seen[2]?.events, events)
  assert.deepEqual(deliveries, [{ as: 'event' }, { as: 'event' }])
})

test('a marker refused in its turn is replaced by a minimal one; a refused minimal marker is retried like an outage', async () => {
  const refuse = (index: number) => ({
    status: 400,
    body: {
      error: { code: 'INVALID_REQUEST', message: 'bad', issues: [{ index, field: `events[${index}]`, message: 'no' }] },
    },
  })
  const { sink, seen } = await server((events, request) =>
    request <= 4 ? refuse(0) : { status: 202, body: { accepted: events.length } },
  )
  const original = event('{"a":1}', 'x'.repeat(300))
  const deliveries = await sink.send([original])
  assert.deepEqual(deliveries, [{ as: 'marker', marker: 'rejected-by-ingest' }])
  const sent = seen.map((request) => request.events[0] as InboundEvent)
  assert.equal(sent[0]?.body, original.body)
  assert.equal(JSON.parse(sent[1]?.body ?? '{}').notifyEdgeMarker, 'rejected-by-ingest')
  // The minimal marker: ASCII ids, no headers, no head of the payload; refused again, it is retried as it is.
  assert.match(sent[2]?.sourceMessageId ?? '', /^sha256:[0-9a-f]{64}$/)
  assert.deepEqual(sent[2]?.headers, {})
  assert.equal(JSON.parse(sent[2]?.body ?? '{}').head, '')
  assert.deepEqual(sent[3], sent[2])
  assert.deepEqual(sent[4], sent[2])
})

test('send() with a signal: aborting withdraws what is not on its way and rejects', async () => {
  const { sink, seen } = await server(() => ({ status: 503 }))
  const controller = new AbortController()
  const pending = sink.send([event('{}')], { signal: controller.signal })
  await waitFor(() => (seen.length >= 1 ? true : undefined), 'a first attempt')
  controller.abort(new Error('rebalance'))
  await assert.rejects(pending, /rebalance/)
  sink.abort()
})

test('429 with Retry-After is retried no sooner than it asks; 5xx is retried; send() resolves only on 202', async () => {
  const { sink, seen } = await server((events, request) =>
    request === 1
      ? { status: 429, headers: { 'retry-after': '1' } }
      : request === 2
        ? { status: 502 }
        : { status: 202, body: { accepted: events.length } },
  )
  let resolved = false
  const done = sink.send([event('{}')]).then(() => {
    resolved = true
  })
  await done
  assert.equal(resolved, true)
  assert.equal(seen.length, 3)
  const [first, second] = seen
  assert.ok((second?.at ?? 0) - (first?.at ?? 0) >= 990, 'Retry-After: 1 was not honoured')
})

test('batches hold at most 100 events', async () => {
  const { sink, seen } = await server(accept)
  await sink.send(Array.from({ length: 250 }, () => event('{}')))
  assert.equal(
    seen.reduce((sum, request) => sum + request.events.length, 0),
    250,
  )
  assert.ok(seen.every((request) => request.events.length <= 100))
})

test("the privacy scan of child output finds an address, a name and a reason, and leaves the sender's own domain alone", () => {
  assert.equal(leaksIn('sent to anna.client@example.com').length, 1)
  assert.equal(leaksIn('{"to":"Анна Клиент"}').length, 1)
  assert.equal(leaksIn('reason: Фото нечитаемо').length, 1)
  assert.deepEqual(
    leaksIn('env.EMAIL_FROM ("notifications@notify-edge.example") Email: /tmp/abc@notify-edge.example.eml'),
    [],
  )
})
