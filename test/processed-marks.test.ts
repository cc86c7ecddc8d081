import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, deliverBatch, freshInbound, runCron } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

/**
 * The processed marks written before they were keyed by event (migration
 * 0022) were not copied: they stay in `processed_events`, which nothing
 * writes any more. Until retention has drained it, an event marked there is
 * still known — a redelivery is a duplicate, its story shows the mark — and
 * retention deletes those marks like the new ones.
 */

function eventIdOf(event: { body: string }): string {
  return JSON.parse(event.body).envelope.eventId
}

/** A mark as the table held it before migration 0022, for this event, processed at `at`. */
async function legacyMark(eventId: string, key: string, at: string): Promise<void> {
  await env.DB.prepare(
    `INSERT INTO processed_events (idempotency_key, event_id, contract, event_type, source, origin,
       source_message_id, outcome, received_at, processed_at, claim, kind)
     VALUES (?1, ?2, 'arthunt', 'invitation.created', 'http', 'test', ?2, 'accepted', ?3, ?3, 'before', 'InvitationCreated')`,
  )
    .bind(key, eventId, at)
    .run()
}

async function count(sql: string, ...values: unknown[]): Promise<number> {
  const row = await env.DB.prepare(sql)
    .bind(...values)
    .first<{ n: number }>()
  return row?.n ?? 0
}

describe('processed marks written before migration 0022', () => {
  it('an event marked in the old table is a duplicate when it comes again: nothing written, nothing told twice; its story shows the mark', async () => {
    const event = freshInbound('invitation.created')
    const eventId = eventIdOf(event)
    const key = `arthunt:invitation.created:${eventId}`
    await legacyMark(eventId, key, new Date().toISOString())
    const result = await deliverBatch([{ id: 'again', attempts: 1, body: event }])
    expect(result.explicitAcks).toEqual(['again'])
    expect(await count('SELECT count(*) AS n FROM processed_marks WHERE event_id = ?1', eventId)).toBe(0)
    expect(await count('SELECT count(*) AS n FROM notifications WHERE event_id = ?1', eventId)).toBe(0)
    const story = await fetchWorker(`/v1/events/${eventId}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    expect(story.status).toBe(200)
    expect(JSON.stringify(await story.json())).toContain(key)
  })

  it('an ignored event marked in the old table gets no second mark when it comes again', async () => {
    const event = freshInbound('invitation.created', (value) => {
      ;(value.envelope as Record<string, unknown>).eventType = 'project.archived'
    })
    const eventId = eventIdOf(event)
    await legacyMark(eventId, `arthunt:project.archived:${eventId}`, new Date().toISOString())
    const result = await deliverBatch([{ id: 'ignored', attempts: 1, body: event }])
    expect(result.explicitAcks).toEqual(['ignored'])
    expect(await count('SELECT count(*) AS n FROM processed_marks WHERE event_id = ?1', eventId)).toBe(0)
    expect(await count('SELECT count(*) AS n FROM processed_events WHERE event_id = ?1', eventId)).toBe(1)
  })

  it('an event not marked there is written to the new table, once', async () => {
    const event = freshInbound('invitation.created')
    const eventId = eventIdOf(event)
    await deliverBatch([{ id: 'first', attempts: 1, body: event }])
    await deliverBatch([{ id: 'again', attempts: 2, body: event }])
    expect(await count('SELECT count(*) AS n FROM processed_marks WHERE event_id = ?1', eventId)).toBe(1)
    expect(await count('SELECT count(*) AS n FROM processed_events WHERE event_id = ?1', eventId)).toBe(0)
    expect(await count('SELECT count(*) AS n FROM notifications WHERE event_id = ?1', eventId)).toBe(1)
  })

  it('retention deletes the old marks past their days, and keeps the newer ones', async () => {
    const now = new Date('2026-12-04T12:00:00Z')
    const old = `legacy-old-${crypto.randomUUID()}`
    const recent = `legacy-new-${crypto.randomUUID()}`
    await legacyMark(old, `arthunt:invitation.created:${old}`, '2026-11-26T11:59:59.000Z')
    await legacyMark(recent, `arthunt:invitation.created:${recent}`, '2026-11-27T12:00:01.000Z')
    await runCron(now)
    expect(await count('SELECT count(*) AS n FROM processed_events WHERE event_id = ?1', old)).toBe(0)
    expect(await count('SELECT count(*) AS n FROM processed_events WHERE event_id = ?1', recent)).toBe(1)
  })
})
