import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { countChanges } from '../src/notifications/counted.ts'
import { markSent } from '../src/notifications/marks.ts'
import { deliverBatch, dispatchBatch, freshInbound, guid, pendingNotification, refuseInserts } from './helpers.ts'

/**
 * notify_notifications_total{channel, kind, status} counts every notification
 * once for each status it reaches. On the hot path (a planned notification's
 * insert, the claim, the `sent` mark) a statement per batch counts the rows
 * that carry the mark their write left (src/notifications/counted.ts); every
 * other change is counted by trigger. These tests hold the counter to the
 * rows through what could count a change twice or not at all: an event
 * delivered twice, a notification named twice in one claim, a claim taken
 * over from a lapsed lease, a mark whose lease was lost, a batch that falls
 * back to one event at a time.
 */

const STATUSES = ['pending', 'sending', 'sent'] as const

/** The resend transport, through the provider fake the tests run beside. */
const RESEND = {
  EMAIL_TRANSPORT: 'resend',
  RESEND_API_KEY: 'test-resend-key',
  RESEND_API_URL: 'http://fake-resend.test',
}

async function counted(kind: string, status: string): Promise<number> {
  const row = await env.DB.prepare(
    `SELECT value FROM counters WHERE name = 'notify_notifications_total'
       AND labels = json_object('channel', 'email', 'kind', ?1, 'status', ?2)`,
  )
    .bind(kind, status)
    .first<{ value: number }>()
  return row?.value ?? 0
}

/** The counter of each status, for a kind. */
async function countsOf(kind: string): Promise<Record<string, number>> {
  return Object.fromEntries(await Promise.all(STATUSES.map(async (status) => [status, await counted(kind, status)])))
}

/** How much each count grew from `before`. */
async function grown(kind: string, before: Record<string, number>): Promise<Record<string, number>> {
  const after = await countsOf(kind)
  return Object.fromEntries(STATUSES.map((status) => [status, (after[status] ?? 0) - (before[status] ?? 0)]))
}

function eventIdOf(event: { body: string }): string {
  return JSON.parse(event.body).envelope.eventId
}

async function notificationIdsOf(eventId: string): Promise<string[]> {
  const { results } = await env.DB.prepare('SELECT id FROM notifications WHERE event_id = ?1').bind(eventId).all<{
    id: string
  }>()
  return results.map((row) => row.id)
}

describe('notify_notifications_total on the hot path', () => {
  it('an event delivered twice, its notification named twice in one claim and dispatched again once sent: pending, sending and sent counted once each', async () => {
    const kind = 'InvitationCreated'
    const before = await countsOf(kind)
    const event = freshInbound('invitation.created')
    // The same event twice in one batch, then redelivered in another.
    await deliverBatch([
      { id: 'first', attempts: 1, body: event },
      { id: 'again', attempts: 1, body: event },
    ])
    await deliverBatch([{ id: 'redelivered', attempts: 2, body: event }])
    const ids = await notificationIdsOf(eventIdOf(event))
    expect(ids).toHaveLength(1)
    const [id] = ids as [string]
    await dispatchBatch([{ notificationId: id }, { notificationId: id }])
    await dispatchBatch([{ notificationId: id }])
    const row = await env.DB.prepare('SELECT status FROM notifications WHERE id = ?1').bind(id).first()
    expect(row).toMatchObject({ status: 'sent' })
    expect(await grown(kind, before)).toEqual({ pending: 1, sending: 1, sent: 1 })
  })

  it('a claim that takes over a lapsed lease counts no second `sending`; its send counts `sent`', async () => {
    const kind = 'InvitationCreated'
    const id = await pendingNotification(`counted-${guid().slice(0, 8)}@example.com`)
    const lapsed = new Date(Date.now() - 60_000).toISOString()
    // Claimed by a delivery that died: the trigger counted that claim's `sending`.
    await env.DB.prepare(
      "UPDATE notifications SET status = 'sending', claim_token = 'dead', lease_until = ?2, claimed_at = ?2 WHERE id = ?1",
    )
      .bind(id, lapsed)
      .run()
    const before = await countsOf(kind)
    // Through a transport with an idempotency key, the take-over sends again under it (no `unknown` wait).
    await dispatchBatch([{ notificationId: id }], RESEND)
    const row = await env.DB.prepare('SELECT status, claim_token FROM notifications WHERE id = ?1').bind(id).first()
    expect(row?.status).toBe('sent')
    expect(row?.claim_token).not.toBe('dead')
    expect(await grown(kind, before)).toEqual({ pending: 0, sending: 0, sent: 1 })
  })

  it('a bundle sent in one request counts each member `sending` and `sent` once', async () => {
    const kind = 'InvitationCreated'
    const ids = await Promise.all(
      Array.from({ length: 3 }, (_, index) => pendingNotification(`bundle-${index}-${guid().slice(0, 8)}@example.com`)),
    )
    const before = await countsOf(kind)
    await dispatchBatch(
      ids.map((notificationId) => ({ notificationId })),
      RESEND,
    )
    const { results } = await env.DB.prepare(
      'SELECT status, batch_id FROM notifications WHERE id IN (SELECT value FROM json_each(?1))',
    )
      .bind(JSON.stringify(ids))
      .all<{ status: string; batch_id: string | null }>()
    expect(results.map((row) => row.status)).toEqual(['sent', 'sent', 'sent'])
    expect(new Set(results.map((row) => row.batch_id)).size).toBe(1)
    expect(results[0]?.batch_id).not.toBeNull()
    expect(await grown(kind, before)).toEqual({ pending: 0, sending: 3, sent: 3 })
  })

  it('a `sent` mark whose lease was lost changes nothing and counts nothing; under its lease it counts once', async () => {
    const kind = 'InvitationCreated'
    const id = await pendingNotification(`fenced-${guid().slice(0, 8)}@example.com`)
    await env.DB.prepare("UPDATE notifications SET status = 'sending', claim_token = 'ours' WHERE id = ?1")
      .bind(id)
      .run()
    const before = await countsOf(kind)
    const now = new Date().toISOString()
    const mark = (token: string, value: number) => [
      markSent(env.DB, id, 'cloudflare', null, now, token, value),
      ...countChanges(env.DB, [{ id, mark: value, status: 'sent' }]),
    ]
    const [fenced] = await env.DB.batch(mark('theirs', 101))
    expect(fenced?.meta.changes).toBe(0)
    expect(await grown(kind, before)).toEqual({ pending: 0, sending: 0, sent: 0 })
    const [applied] = await env.DB.batch(mark('ours', 102))
    expect(applied?.meta.changes).toBe(1)
    expect(await grown(kind, before)).toEqual({ pending: 0, sending: 0, sent: 1 })
  })

  it('a batch that falls back to one event at a time counts each written notification once, and the failing one not at all', async () => {
    const kind = 'InvitationCreated'
    const events = Array.from({ length: 5 }, () => freshInbound('invitation.created'))
    const broken = freshInbound('invitation.created')
    const repair = await refuseInserts(
      'processed_marks',
      `NEW.event_id = '${eventIdOf(broken)}'`,
      'injected D1 failure for one event',
    )
    try {
      const before = await countsOf(kind)
      const result = await deliverBatch([
        ...events.slice(0, 2).map((body, index) => ({ id: `m${index}`, attempts: 1, body })),
        { id: 'broken', attempts: 1, body: broken },
        ...events.slice(2).map((body, index) => ({ id: `m${index + 2}`, attempts: 1, body })),
      ])
      expect(result.retryMessages.map((retry) => retry.msgId)).toEqual(['broken'])
      for (const event of events) expect(await notificationIdsOf(eventIdOf(event))).toHaveLength(1)
      expect(await notificationIdsOf(eventIdOf(broken))).toEqual([])
      expect(await grown(kind, before)).toEqual({ pending: 5, sending: 0, sent: 0 })
    } finally {
      await repair()
    }
  })

  it('a change off the hot path is still counted by its trigger', async () => {
    const kind = 'InvitationCreated'
    const id = await pendingNotification(`cold-${guid().slice(0, 8)}@example.com`)
    const before = await countsOf(kind)
    // An operator's hand, or any statement that leaves count_mark alone.
    await env.DB.prepare("UPDATE notifications SET status = 'sending' WHERE id = ?1").bind(id).run()
    await env.DB.prepare("UPDATE notifications SET status = 'sent' WHERE id = ?1").bind(id).run()
    expect(await grown(kind, before)).toEqual({ pending: 0, sending: 1, sent: 1 })
  })
})
