/**
 * The recipients spread over D1 shards (src/d1/shards.ts). In the `two
 * databases` project (DB_SHARDS=2) these tests put recipients in both shards;
 * in the `worker` project (one database) they run the same with both in the
 * primary, and check that one shard is what a deployment always had.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { bucketOfId } from '../src/d1/shards.ts'
import { deadLetterEnvelope } from '../src/queue/dead-letter-envelope.ts'
import { cloudflareEvent, eventIdOf as responseIdOf, responseTo } from './email-events.ts'
import {
  ADMIN_TOKEN,
  deliver,
  deliverBatch,
  eventually,
  freshInbound,
  guid,
  notificationsOf,
  parseMime,
  pendingNotification,
  postIngest,
  runCron,
  seedContact,
  sentMessagesOf,
  storeDeadLetters,
} from './helpers.ts'
import { allRows, allShards, dbOfNotification, dbOfUser, shardDbs, userInShard } from './shards.ts'
import { fetchWorker } from './worker-fetch.ts'

const eventIdOf = (event: { headers: Record<string, string> }) => event.headers['message-id'] as string

/** The operator API, as the admin. */
async function api<T = Record<string, unknown>>(method: string, path: string, body?: unknown) {
  const response = await fetchWorker(path, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: response.status, body: (response.status === 204 ? {} : await response.json()) as T }
}

/** A user id whose rows live in shard `shard` (of the shards under test). */
const userIn = (shard: number) => userInShard(shard, shardDbs().length)

/** Reviewers in the pool (kept in the primary), one per shard, with their contacts in their own shards. */
async function reviewersInEveryShard(): Promise<{ reviewers: string[]; remove: () => Promise<void> }> {
  const reviewers = await Promise.all([0, 1].map(userIn))
  for (const reviewer of reviewers) {
    await seedContact(reviewer, { email: `reviewer-${reviewer.slice(0, 8)}@example.com` })
    await env.DB.prepare('INSERT INTO reviewer_pool (user_id, added_at) VALUES (?1, ?2)')
      .bind(reviewer, new Date().toISOString())
      .run()
  }
  const remove = async () => {
    await env.DB.prepare('DELETE FROM reviewer_pool WHERE user_id IN (?1, ?2)')
      .bind(...reviewers)
      .run()
  }
  return { reviewers, remove }
}

/** A request for the whole pool's review. */
const poolRequest = () =>
  freshInbound('verification-request-submitted', (value) => {
    delete value.ReviewerUserId
  })

/** The processed marks of an event in each shard, in shard order. */
async function marksByShard(eventId: string): Promise<number[]> {
  return Promise.all(
    shardDbs().map(async (db) => {
      const row = await db
        .prepare('SELECT count(*) AS n FROM processed_marks WHERE event_id = ?1')
        .bind(eventId)
        .first<{ n: number }>()
      return row?.n ?? 0
    }),
  )
}

/** Waits until the notification is `sent`, read in the shard its id names. */
function sentInItsShard(id: string) {
  return eventually(async () => {
    const row = await dbOfNotification(id)
      .prepare('SELECT status FROM notifications WHERE id = ?1')
      .bind(id)
      .first<{ status: string }>()
    expect(row?.status).toBe('sent')
  })
}

/** notify_events_total for an outcome, summed over the shards. */
async function eventsCounted(outcome: string): Promise<number> {
  const values = await allRows<{ value: number }>(
    "SELECT value FROM counters WHERE name = 'notify_events_total' AND labels = ?1",
    JSON.stringify({ outcome, source: 'http' }),
  )
  return values.reduce((sum, row) => sum + row.value, 0)
}

describe('recipients spread over D1 shards', () => {
  it("each recipient's notification is written in the recipient's shard, and the event is marked in each", async () => {
    const { reviewers, remove } = await reviewersInEveryShard()
    try {
      const event = poolRequest()
      const result = await deliver(event, 1)
      expect(result.explicitAcks).toHaveLength(1)
      const eventId = eventIdOf(event)
      for (const reviewer of reviewers) {
        const db = await dbOfUser(reviewer)
        const row = await db
          .prepare('SELECT id FROM notifications WHERE event_id = ?1 AND recipient_user_id = ?2')
          .bind(eventId, reviewer)
          .first<{ id: string }>()
        // The id names its shard: every later step finds the row by it.
        expect(dbOfNotification(row?.id as string)).toBe(db)
        expect(bucketOfId(row?.id as string)).toBeTypeOf('number')
      }
      const marks = await marksByShard(eventId)
      expect(marks).toEqual(shardDbs().length === 2 ? [1, 1] : [1])
      await eventually(async () => expect(await sentMessagesOf(eventId)).toHaveLength(2))
    } finally {
      await remove()
    }
  })

  it('an event whose second shard fails midway is retried, and redelivered ends with one email each, counted once', async () => {
    const { reviewers, remove } = await reviewersInEveryShard()
    const event = poolRequest()
    const eventId = eventIdOf(event)
    const last = shardDbs().at(-1) as D1Database
    const trigger = `refuse_${guid().replaceAll('-', '_')}`
    const enqueued = await eventsCounted('enqueued')
    try {
      // The last shard refuses this event's processed mark: its transaction fails as a crash would leave it.
      await last
        .prepare(
          `CREATE TRIGGER ${trigger} BEFORE INSERT ON processed_marks WHEN NEW.event_id = '${eventId}'
           BEGIN SELECT RAISE(ABORT, 'the shard went away'); END`,
        )
        .run()
      const first = await deliver(event, 1, 'msg-crash')
      expect(first.explicitAcks).toEqual([])
      expect(first.retryMessages).toEqual([{ msgId: 'msg-crash', delaySeconds: 5 }])
      if (shardDbs().length === 2) {
        // The first shard committed its part, and its email goes; the second has nothing of it.
        expect(await marksByShard(eventId)).toEqual([1, 0])
        await eventually(async () => expect(await sentMessagesOf(eventId)).toHaveLength(1))
      } else expect(await marksByShard(eventId)).toEqual([0])
      await last.prepare(`DROP TRIGGER ${trigger}`).run()

      // The retry writes what is missing; a redelivery after it writes nothing.
      const second = await deliver(event, 2, 'msg-crash')
      expect(second.explicitAcks).toEqual(['msg-crash'])
      const third = await deliver(event, 1, 'msg-again')
      expect(third.explicitAcks).toEqual(['msg-again'])
      expect(await marksByShard(eventId)).toEqual(shardDbs().map(() => 1))
      await eventually(async () => expect(await sentMessagesOf(eventId)).toHaveLength(2))
      const sent = await sentMessagesOf(eventId)
      const to = sent.map(({ raw }) => /(reviewer-[0-9a-f]{8})@/.exec(parseMime(raw).headers.to ?? '')?.[1])
      expect(to.sort()).toEqual(reviewers.map((reviewer) => `reviewer-${reviewer.slice(0, 8)}`).sort())
      expect(await eventsCounted('enqueued')).toBe(enqueued + 1)
    } finally {
      await last
        .prepare(`DROP TRIGGER IF EXISTS ${trigger}`)
        .run()
        .catch(() => undefined)
      await remove()
    }
  })

  it("the cron finds a notification whose dispatch message was lost in the recipient's shard, and sends it", async () => {
    const user = await userIn(1)
    const email = `stuck-${user.slice(0, 8)}@example.com`
    const long = '2000-01-01T00:00:00.000Z'
    const id = await pendingNotification(email, { userId: user, scheduledAt: long, enqueuedAt: long })
    const db = dbOfNotification(id)
    expect(db).toBe(await dbOfUser(user))
    await runCron(new Date())
    await sentInItsShard(id)
  })

  it("the operator API finds a notification by its id in its shard, and tells an event's story from every shard", async () => {
    const { reviewers, remove } = await reviewersInEveryShard()
    try {
      const event = poolRequest()
      await deliver(event, 1)
      const eventId = eventIdOf(event)
      const story = await api<{ processed: unknown[]; notifications: { id: string; recipientUserId?: string }[] }>(
        'GET',
        `/v1/events/${eventId}`,
      )
      expect(story.status).toBe(200)
      // One processed mark per shard the event was written in, and both notifications.
      expect(story.body.processed).toHaveLength(shardDbs().length)
      expect(story.body.notifications).toHaveLength(reviewers.length)
      for (const { id } of story.body.notifications) {
        const one = await api<{ id: string }>('GET', `/v1/notifications/${id}`)
        expect(one).toMatchObject({ status: 200, body: { id } })
      }
    } finally {
      await remove()
    }
  })

  it('an erasure by address finds the person in every shard, and one audit row counts them all', async () => {
    const user = await userIn(1)
    const address = `erase-${user.slice(0, 8)}@example.com`
    const id = await pendingNotification(address, { userId: user, scheduledAt: '2999-01-01T00:00:00.000Z' })
    await seedContact(user, { email: address })
    // An operator's suppression is written in every shard: any of them may hold a recipient at the address.
    expect((await api('PUT', `/v1/suppressions/${address}`, { reason: 'asked' })).status).toBe(200)
    const listed = await allRows('SELECT address FROM suppressions WHERE address = ?1', address)
    expect(listed).toHaveLength(shardDbs().length)

    const erased = await api<{ erased: Record<string, number> }>('POST', '/v1/erasures', { address })
    expect(erased.status).toBe(200)
    expect(erased.body.erased).toMatchObject({ contacts: 1, notifications: 1, suppressions: shardDbs().length })
    const left = await allRows(
      `SELECT 'contact' AS what FROM contacts WHERE user_id = ?1
       UNION ALL SELECT 'suppression' FROM suppressions WHERE address = ?2
       UNION ALL SELECT 'notification' FROM notifications WHERE id = ?3 AND recipient_email IS NOT NULL`,
      user,
      address,
      id,
    )
    expect(left).toEqual([])
    const audit = await env.DB.prepare(
      "SELECT parameters FROM audit_log WHERE action = 'recipient.erase' ORDER BY id DESC LIMIT 1",
    ).first<{ parameters: string }>()
    expect(JSON.parse(audit?.parameters ?? '{}').erased).toEqual(erased.body.erased)
  })

  it("dead letters of every shard are listed in one order that a cursor keeps, and a shard's is replayed there", async () => {
    const user = await userIn(1)
    const address = `late-${user.slice(0, 8)}@example.com`
    // A notification whose contact never came, in the user's shard: the cron ends it with a dead letter there.
    const db = await dbOfUser(user)
    const id = await pendingNotification(address, { userId: user })
    await db
      .prepare(
        "UPDATE notifications SET status = 'awaiting-contact', recipient_email = NULL, scheduled_at = ?2 WHERE id = ?1",
      )
      .bind(id, '2000-01-01T00:00:00.000Z')
      .run()
    await runCron(new Date())
    const letter = await db
      .prepare("SELECT id FROM dead_letters WHERE code = 'NTF_CONTACT_NOT_FOUND' AND body LIKE ?1")
      .bind(`%${id}%`)
      .first<{ id: string }>()
    expect(letter).not.toBeNull()
    await storeDeadLetters(2, 'NTF_INVALID_PAYLOAD')

    // One item a page: every dead letter once, in the list's order, across the shards.
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const page: { body: { items: { id: string; firstSeen: string }[]; nextCursor: string | null } } = await api(
        'GET',
        `/v1/dead-letters?limit=1&order=asc${cursor ? `&cursor=${cursor}` : ''}`,
      )
      seen.push(...page.body.items.map((item) => item.id))
      cursor = page.body.nextCursor
    } while (cursor)
    const all = (await allRows<{ id: string }>('SELECT id FROM dead_letters')).map((row) => row.id)
    expect(seen.sort()).toEqual(all.sort())
    expect(new Set(seen).size).toBe(seen.length)

    // As if it had failed to send instead (with its address): the replay resets it in its shard, and it goes.
    await db
      .prepare("UPDATE notifications SET status = 'failed', recipient_email = ?2 WHERE id = ?1")
      .bind(id, address)
      .run()
    const replayed = await api<{ replayed: string[] }>('POST', `/v1/dead-letters/${letter?.id}/replay`)
    expect(replayed).toMatchObject({ status: 200, body: { replayed: [letter?.id] } })
    await sentInItsShard(id)
  })

  it('/metrics adds up the counters of every shard', async () => {
    const counted = await eventsCounted('enqueued')
    const response = await fetchWorker('/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    const text = await response.text()
    const line = text
      .split('\n')
      .find(
        (entry) =>
          entry.startsWith('notify_events_total{') &&
          entry.includes('outcome="enqueued"') &&
          entry.includes('source="http"'),
      )
    expect(Number(line?.split(' ').at(-1))).toBe(counted)
  })

  it('a complaint about an email from one shard suppresses its address in every shard: a recipient at it in another is not emailed', async () => {
    const [first, second] = await Promise.all([userIn(0), userIn(1)])
    const address = `shared-${guid().slice(0, 8)}@example.com`
    /** Ingests a response to `userId` at the shared address; its one notification once it reached `status`. */
    const notify = async (userId: string, status: string) => {
      const event = responseTo(address, userId)
      expect((await postIngest({ events: [event] })).status).toBe(202)
      return eventually(async () => {
        const [row] = await notificationsOf(responseIdOf(event))
        expect(row?.status).toBe(status)
        return row as NonNullable<typeof row>
      })
    }
    const sent = await notify(first as string, 'sent')
    const provider = await dbOfNotification(sent.id)
      .prepare('SELECT provider_id FROM notifications WHERE id = ?1')
      .bind(sent.id)
      .first<string>('provider_id')
    await env.EMAIL_EVENTS.send(
      cloudflareEvent('complained', provider as string, address, { complaint: { type: 'abuse' } }),
    )
    await eventually(async () => {
      const entries = await allRows<{ cause: string }>('SELECT cause FROM suppressions WHERE address = ?1', address)
      expect(entries).toEqual(shardDbs().map(() => ({ cause: 'complaint' })))
    })
    const next = await notify(second as string, 'suppressed')
    expect(next.error_code).toBe('NTF_RECIPIENT_SUPPRESSED')
  })

  it("a dead letter of notify-dispatch is kept in its notification's shard, one row with the one its failed mark writes", async () => {
    const user = await userIn(1)
    const id = await pendingNotification(`dlq-${user.slice(0, 8)}@example.com`, { userId: user })
    const envelope = deadLetterEnvelope(
      'notify-dispatch',
      { id: guid(), attempts: 10, body: { notificationId: id } },
      { code: 'NTF_DEPENDENCY_FAILED', error: 'D1 was away' },
    )
    const stored = await deliverBatch([{ id: `dlq-${guid()}`, attempts: 1, body: envelope }], 'notify-dlq')
    expect(stored.explicitAcks).toHaveLength(1)
    const found = await allShards(async (db) => {
      const { results } = await db.prepare('SELECT id FROM dead_letters WHERE body LIKE ?1').bind(`%${id}%`).all()
      return results.map(() => db)
    })
    expect(found).toEqual([dbOfNotification(id)])
  })

  it('an erasure that fails in a shard after the primary leaves that shard as it was, and erasing again finishes it', async () => {
    const user = await userIn(1)
    const address = `again-${user.slice(0, 8)}@example.com`
    await seedContact(user, { email: address })
    const last = shardDbs().at(-1) as D1Database
    const trigger = `refuse_${guid().replaceAll('-', '_')}`
    await last
      .prepare(
        `CREATE TRIGGER ${trigger} BEFORE DELETE ON contacts WHEN OLD.user_id = '${user}'
         BEGIN SELECT RAISE(ABORT, 'the shard went away'); END`,
      )
      .run()
    try {
      expect((await api('POST', '/v1/erasures', { address })).status).toBe(500)
    } finally {
      await last.prepare(`DROP TRIGGER ${trigger}`).run()
    }
    // The contact is still there to find the person by: erasing again by the address reaches it.
    const again = await api<{ erased: Record<string, number> }>('POST', '/v1/erasures', { address })
    expect(again).toMatchObject({ status: 200, body: { erased: { contacts: 1 } } })
    const left = await (await dbOfUser(user))
      .prepare('SELECT count(*) AS n FROM contacts WHERE user_id = ?1')
      .bind(user)
      .first<{ n: number }>()
    expect(left?.n).toBe(0)
  })
})
