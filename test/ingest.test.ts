import { env } from 'cloudflare:workers'
import { describe, expect, it, vi } from 'vitest'
import { INBOUND_EVENT_MAX_BYTES, INGEST_MAX_BYTES } from '../src/contracts/index.ts'
import { ADMIN_TOKEN, freshInbound, inbound, postIngest } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

async function errorOf(response: Response) {
  const body = (await response.json()) as { error: { code: string; message: string; issues?: { field: string }[] } }
  return body.error
}

/** Waits until the notify-events consumer recorded these idempotency keys. */
async function processedKeys(keys: string[]) {
  return vi.waitFor(
    async () => {
      const { results } = await env.DB.prepare(
        `SELECT idempotency_key, outcome FROM processed_marks WHERE idempotency_key IN (${keys.map(() => '?').join(',')})`,
      )
        .bind(...keys)
        .all<{ idempotency_key: string; outcome: string }>()
      expect(results).toHaveLength(keys.length)
      return results
    },
    { timeout: 20_000, interval: 100 },
  )
}

describe('POST /v1/ingest', () => {
  const one = () => ({ events: [freshInbound('response.created')] })

  it('401 without a token and with a wrong one; 403 with the admin token', async () => {
    const none = await postIngest(one(), null)
    expect(none.status).toBe(401)
    expect(await errorOf(none)).toMatchObject({ code: 'UNAUTHORIZED' })
    const wrong = await postIngest(one(), 'test-ingest-token-0123456780')
    expect(wrong.status).toBe(401)
    expect(await errorOf(wrong)).toMatchObject({ code: 'UNAUTHORIZED' })
    const admin = await postIngest(one(), ADMIN_TOKEN)
    expect(admin.status).toBe(403)
    expect(await errorOf(admin)).toMatchObject({ code: 'FORBIDDEN' })
  })

  it('400 for malformed JSON', async () => {
    const response = await postIngest('{"events": [')
    expect(response.status).toBe(400)
    expect(await errorOf(response)).toMatchObject({ code: 'INVALID_JSON' })
  })

  it('400 for 101 events, and for none', async () => {
    const events = Array.from({ length: 101 }, () => freshInbound('response.created'))
    const response = await postIngest({ events })
    expect(response.status).toBe(400)
    expect(await errorOf(response)).toMatchObject({ code: 'INVALID_REQUEST', issues: [{ field: 'events' }] })
    expect((await postIngest({ events: [] })).status).toBe(400)
  })

  it('400 for a bad event, naming its index and field', async () => {
    const events = [freshInbound('response.created'), { ...freshInbound('response.created'), receivedAt: 'now' }]
    const response = await postIngest({ events })
    expect(response.status).toBe(400)
    const error = await errorOf(response)
    expect(error.code).toBe('INVALID_REQUEST')
    expect(error.issues).toEqual([{ field: 'events[1].receivedAt', message: expect.any(String), index: 1 }])
  })

  it('413 over 256 KB, and for one event too large for a queue message', async () => {
    const padding = 'x'.repeat(INGEST_MAX_BYTES)
    const tooLarge = await postIngest({ events: [inbound({ padding })] })
    expect(tooLarge.status).toBe(413)
    expect(await errorOf(tooLarge)).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' })

    const bigEvent = inbound({ padding: 'x'.repeat(INBOUND_EVENT_MAX_BYTES) })
    const oversized = await postIngest({ events: [freshInbound('response.created'), bigEvent] })
    expect(oversized.status).toBe(413)
    expect(await errorOf(oversized)).toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      issues: [{ field: 'events[1]', index: 1 }],
    })
  })

  it('202 only after the events are on the queue: they reach the consumer', async () => {
    const events = Array.from({ length: 100 }, (_, index) =>
      freshInbound(index % 2 === 0 ? 'response.created' : 'invitation.created'),
    )
    const response = await postIngest({ events })
    expect(response.status).toBe(202)
    expect(await response.json()).toEqual({ accepted: 100 })
    const keys = events.map((event) => {
      const { envelope } = JSON.parse(event.body)
      return `arthunt:${envelope.eventType}:${envelope.eventId}`
    })
    const rows = await processedKeys(keys)
    // Responses are told in their owners' digests (ResponseCreated's default); invitations go at once.
    expect(rows.map((row) => row.outcome).sort()).toEqual([
      ...Array<string>(50).fill('digested'),
      ...Array<string>(50).fill('enqueued'),
    ])
  })

  it('sets secure headers and answers unknown routes with a coded 404', async () => {
    const health = await fetchWorker('/healthz')
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ status: 'ok' })
    expect(health.headers.get('x-content-type-options')).toBe('nosniff')
    const missing = await fetchWorker('/nothing')
    expect(missing.status).toBe(404)
    // Under /v1 a route is only told apart from a missing one with a valid token.
    expect((await fetchWorker('/v1/nothing')).status).toBe(401)
    const adminMissing = await fetchWorker('/v1/nothing', {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    })
    expect(adminMissing.status).toBe(404)
    expect(missing.headers.get('x-content-type-options')).toBe('nosniff')
    expect(await errorOf(missing)).toMatchObject({ code: 'NOT_FOUND' })
    const denied = await postIngest(one(), null)
    expect(denied.headers.get('x-content-type-options')).toBe('nosniff')
  })
})
