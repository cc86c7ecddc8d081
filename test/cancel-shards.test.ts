/**
 * Cancel by key across D1 shards (run in both projects: one database, and
 * two): a key's notifications in either shard are withdrawn by one
 * cancellation, the key is recorded in every shard, and an event of it that
 * comes later creates nothing whichever shard its recipient is in — also
 * when the cancellation is an event, which the events consumer handles in the
 * primary's part of its batch.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { adminCall, deliverBatch, freshInbound, guid, quietAroundNow } from './helpers.ts'
import { allRows, dbOfUser, shardDbs, userInShard } from './shards.ts'

/** An invitation to `userId`, under `invitationId`. */
function invitationTo(userId: string, invitationId: string) {
  let eventId = ''
  const message = freshInbound('invitation.created', (value) => {
    const data = value.data as Record<string, unknown>
    data.invitationId = invitationId
    data.recipient = { userId, email: `sharded-${userId.slice(0, 8)}@example.com`, displayName: 'Михаил Дизайнер' }
    eventId = (value.envelope as { eventId: string }).eventId
  })
  return { message, eventId }
}

async function statusesOf(userId: string, eventId: string): Promise<string[]> {
  const { results } = await (await dbOfUser(userId))
    .prepare('SELECT status FROM notifications WHERE event_id = ?1')
    .bind(eventId)
    .all<{ status: string }>()
  return results.map((row) => row.status)
}

const deliver = (messages: unknown[], vars: Record<string, unknown> = {}) =>
  deliverBatch(
    messages.map((body) => ({ id: `m-${guid()}`, attempts: 1, body })),
    'notify-events',
    vars,
  )

describe('cancel by key, over the D1 shards', () => {
  it('withdraws the key in every shard, records it in each, and a late event in either creates nothing', async () => {
    const count = shardDbs().length
    const invitationId = guid()
    const key = `invitation:${invitationId}`
    const [first, second, late] = await Promise.all([
      userInShard(0, count),
      userInShard(1, count),
      userInShard(1, count),
    ])
    // One invitation id told to two specialists (a producer's re-send to a colleague), each in a shard of their own.
    const a = invitationTo(first as string, invitationId)
    const b = invitationTo(second as string, invitationId)
    await deliver([a.message, b.message], quietAroundNow())
    expect(await statusesOf(first as string, a.eventId)).toEqual(['pending'])
    expect(await statusesOf(second as string, b.eventId)).toEqual(['pending'])
    const report = await adminCall<{ notifications: { outcome: string }[] }>('POST', '/v1/cancellations', { key })
    expect(report.body.notifications.map((n) => n.outcome)).toEqual(['cancelled', 'cancelled'])
    expect(await statusesOf(first as string, a.eventId)).toEqual(['cancelled'])
    expect(await statusesOf(second as string, b.eventId)).toEqual(['cancelled'])
    expect(await allRows('SELECT key FROM cancellations WHERE key = ?1', key)).toHaveLength(count)
    const after = invitationTo(late as string, invitationId)
    await deliver([after.message])
    expect(await statusesOf(late as string, after.eventId)).toEqual([])
  })

  it('an invitation.withdrawn withdraws an invitation whose specialist is in another shard than the primary', async () => {
    const count = shardDbs().length
    const invitationId = guid()
    const userId = await userInShard(1, count)
    const created = invitationTo(userId, invitationId)
    await deliver([created.message], quietAroundNow())
    expect(await statusesOf(userId, created.eventId)).toEqual(['pending'])
    const withdrawn = freshInbound('invitation.withdrawn', (value) => {
      ;(value.data as Record<string, unknown>).invitationId = invitationId
    })
    await deliver([withdrawn])
    expect(await statusesOf(userId, created.eventId)).toEqual(['cancelled'])
    // Nothing of it in the primary's own tables but the key, when the specialist is elsewhere.
    expect(
      (
        await env.DB.prepare('SELECT count(*) AS n FROM cancellations WHERE key = ?1')
          .bind(`invitation:${invitationId}`)
          .first<{ n: number }>()
      )?.n,
    ).toBe(1)
  })
})
