import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { cappedStatusCounts } from '../src/console/counts.ts'
import { discardOpen } from '../src/dead-letters/resolve.ts'
import { sentLastHour } from '../src/health/transport-reads.ts'
import { loadContext } from '../src/materialize/context.ts'
import { deleteProcessedEventsBefore } from '../src/materialize/processed.ts'
import { noCost } from '../src/metrics/cost.ts'
import { incrementClaimed } from '../src/metrics/counters.ts'
import { meteredD1 } from '../src/metrics/metered-d1.ts'
import { markExpired, selectReleasable } from '../src/notifications/contact-wait.ts'
import { countChanges } from '../src/notifications/counted.ts'
import { resolveUnknownOutcomes } from '../src/notifications/marks.ts'
import { selectStuckNotifications } from '../src/notifications/stuck.ts'
import { guid, pendingNotification, seedContact, storeDeadLetters } from './helpers.ts'

/**
 * What the statements that find their rows by key read — a list of ids, of
 * idempotency keys, of users — beside a backlog of rows in the status they
 * filter on. D1's `meta.rows_read` counts every row SQLite visits; left to
 * itself, SQLite chose the index that starts with the status for several of
 * them, read every row of that status and filtered it by the list, so each
 * statement read the whole backlog (src/sql.ts, `STATUS_AS_FILTER`). The same
 * for the cron's searches, which ran every minute over tables that keep months
 * of rows. Each test puts a backlog of `BACKLOG` rows beside the few it is
 * about and asks for a read far below it.
 */

const BACKLOG = 200

/** `count` notifications as `pendingNotification` writes them, then in `status` and due at `scheduledAt`. */
async function notifications(count: number, tag: string, status: string, scheduledAt: string): Promise<string[]> {
  const ids = await Promise.all(
    Array.from({ length: count }, (_, index) => pendingNotification(`${status}-${index}-${tag}@example.com`)),
  )
  await env.DB.prepare(
    'UPDATE notifications SET status = ?2, scheduled_at = ?3 WHERE id IN (SELECT value FROM json_each(?1))',
  )
    .bind(JSON.stringify(ids), status, scheduledAt)
    .run()
  return ids
}

/** The events of these notifications, as a batch context names them. */
async function eventsOf(ids: string[]): Promise<{ eventId: string; idempotencyKey: string }[]> {
  const { results } = await env.DB.prepare(
    'SELECT event_id, idempotency_key FROM notifications WHERE id IN (SELECT value FROM json_each(?1))',
  )
    .bind(JSON.stringify(ids))
    .all<{ event_id: string; idempotency_key: string }>()
  return results.map((row) => ({ eventId: row.event_id, idempotencyKey: row.idempotency_key }))
}

describe('what the statements keyed by a list read', () => {
  it("a batch context looks its events' pending notifications up by event, not through the pending backlog", async () => {
    const tag = guid().slice(0, 8)
    await notifications(BACKLOG, `backlog-${tag}`, 'pending', new Date().toISOString())
    const mine = [
      await pendingNotification(`one-${tag}@example.com`),
      await pendingNotification(`two-${tag}@example.com`),
    ]
    const cost = noCost()
    // pendingNotification's idempotency key is `test:` and the id.
    const context = await loadContext(meteredD1(env.DB, cost), {
      events: await eventsOf(mine),
      userIds: [],
      needPool: false,
      kinds: [],
      decisionPersons: [],
    })
    expect([...context.pendingByEvent.values()].flat().map((row) => row.id)).toEqual(expect.arrayContaining(mine))
    expect(context.pendingByEvent.size).toBe(2)
    // All eight reads of the context: 31 rows here, for the two events and the channel policies. By
    // the status index, the pending statement alone read every pending notification: 227 in all.
    expect(cost.d1RowsRead).toBeLessThan(BACKLOG)
  })

  it('ending contact waits reads the notifications it ends, not every one still waiting', async () => {
    const tag = guid().slice(0, 8)
    await notifications(BACKLOG, `backlog-${tag}`, 'awaiting-contact', new Date(Date.now() + 3_600_000).toISOString())
    const ended = await notifications(2, `ended-${tag}`, 'awaiting-contact', new Date().toISOString())
    const result = await markExpired(env.DB, ended, new Date().toISOString()).run()
    const { results } = await env.DB.prepare(
      'SELECT status FROM notifications WHERE id IN (SELECT value FROM json_each(?1))',
    )
      .bind(JSON.stringify(ended))
      .all<{ status: string }>()
    expect(results.map((row) => row.status)).toEqual(['undeliverable', 'undeliverable'])
    // 12 rows by primary key; 211 through the status index.
    expect(result.meta.rows_read).toBeLessThan(BACKLOG)
  })

  it("a contact batch finds its users' waiting notifications by recipient, not among every waiting one", async () => {
    const tag = guid().slice(0, 8)
    await notifications(BACKLOG, `backlog-${tag}`, 'awaiting-contact', new Date(Date.now() + 3_600_000).toISOString())
    const waiting = await notifications(
      2,
      `mine-${tag}`,
      'awaiting-contact',
      new Date(Date.now() + 3_600_000).toISOString(),
    )
    const users = waiting.map((id) => `user-${id}`)
    for (const [index, id] of waiting.entries()) {
      await env.DB.prepare('UPDATE notifications SET recipient_user_id = ?2 WHERE id = ?1').bind(id, users[index]).run()
      await seedContact(users[index] as string)
    }
    const result = await selectReleasable(env.DB, users, 200).all<{ id: string }>()
    expect(result.results.map((row) => row.id).sort()).toEqual([...waiting].sort())
    // 11 rows by recipient; 409 through the status index (this test's backlog and the one before).
    expect(result.meta.rows_read).toBeLessThan(BACKLOG)
  })

  it('a bulk discard reads the dead letters it names, not every open one, and returns the ones it changed', async () => {
    const tag = guid().slice(0, 8).toUpperCase()
    await storeDeadLetters(BACKLOG, `BACKLOG_${tag}`)
    await storeDeadLetters(2, `MINE_${tag}`)
    const idsOf = async (code: string) =>
      (
        await env.DB.prepare('SELECT id FROM dead_letters WHERE code = ?1').bind(code).all<{ id: string }>()
      ).results.map((row) => row.id)
    const mine = await idsOf(`MINE_${tag}`)
    const now = new Date().toISOString()
    const discarded = await discardOpen(env.DB, mine, 'test', now).all<{ id: string }>()
    // It answers exactly the ones it changed, which is the route's answer.
    expect(discarded.results.map((row) => row.id).sort()).toEqual([...mine].sort())
    // 14 rows by primary key (the counters' trigger included); 212 through the status index.
    expect(discarded.meta.rows_read).toBeLessThan(BACKLOG)
    // Asked again, nothing is open any more: nothing changed, nothing answered.
    expect((await discardOpen(env.DB, mine, 'again', now).all()).results).toEqual([])
  })
})

/** `count` processed marks of fresh events, processed at `at`; their event ids and keys. */
async function processedMarks(
  count: number,
  tag: string,
  at: string,
): Promise<{ eventId: string; idempotencyKey: string }[]> {
  const events = Array.from({ length: count }, (_, index) => ({
    eventId: `${tag}-${index}`,
    idempotencyKey: `arthunt:ResponseCreated:${tag}-${index}`,
  }))
  await env.DB.prepare(
    `INSERT INTO processed_marks (idempotency_key, event_id, contract, event_type, source, origin, source_message_id,
       outcome, received_at, processed_at, claim)
     SELECT json_extract(value, '$.idempotencyKey'), json_extract(value, '$.eventId'), 'arthunt', 'ResponseCreated',
       'http', 'test', json_extract(value, '$.eventId'), 'accepted', ?2, ?2, ?3
     FROM json_each(?1)`,
  )
    .bind(JSON.stringify(events), at, tag)
    .run()
  return events
}

describe('what the processed marks cost to find', () => {
  it("a batch's marks, their counter, an event's story and a retention chunk read the marks they are about, not the backlog", async () => {
    const tag = guid().slice(0, 8)
    const recent = new Date().toISOString()
    await processedMarks(BACKLOG, `backlog-${tag}`, recent)
    // And as many written before migration 0022, which the lookups read beside them.
    await env.DB.prepare(
      `INSERT INTO processed_events (idempotency_key, event_id, contract, event_type, source, origin, source_message_id,
         outcome, received_at, processed_at)
       SELECT 'legacy:' || idempotency_key, 'legacy-' || event_id, contract, event_type, source, origin,
         source_message_id, outcome, received_at, processed_at FROM processed_marks WHERE event_id LIKE ?1`,
    )
      .bind(`backlog-${tag}-%`)
      .run()
    const mine = await processedMarks(2, `mine-${tag}`, '2000-01-01T00:00:00.000Z')
    const read = async (statement: (db: D1Database) => D1PreparedStatement) => {
      const cost = noCost()
      await statement(meteredD1(env.DB, cost)).all()
      return cost.d1RowsRead
    }
    const context = noCost()
    const found = await loadContext(meteredD1(env.DB, context), {
      events: mine,
      userIds: [],
      needPool: false,
      kinds: [],
      decisionPersons: [],
    })
    expect([...found.processed].sort()).toEqual(mine.map((event) => event.idempotencyKey).sort())
    expect(context.d1RowsRead).toBeLessThan(BACKLOG)
    expect(await read((db) => incrementClaimed(db, 'query_plans_test_total', '{}', mine, `mine-${tag}`))).toBeLessThan(
      BACKLOG,
    )
    const counted = await env.DB.prepare("SELECT value FROM counters WHERE name = 'query_plans_test_total'").first()
    expect(counted).toEqual({ value: 2 })
    expect(
      await read((db) =>
        db.prepare('SELECT * FROM processed_marks WHERE event_id = ?1 ORDER BY processed_at').bind(mine[0]?.eventId),
      ),
    ).toBeLessThan(BACKLOG)
    // The two old marks are the oldest: one chunk takes them, by the primary key.
    expect(await read((db) => deleteProcessedEventsBefore(db, '2001-01-01T00:00:00.000Z', 10))).toBeLessThan(BACKLOG)
    const left = await env.DB.prepare('SELECT count(*) AS n FROM processed_marks WHERE event_id IN (?1, ?2)')
      .bind(mine[0]?.eventId, mine[1]?.eventId)
      .first()
    expect(left).toEqual({ n: 0 })
  })
})

describe('what counting the hot path costs', () => {
  it("a batch's count reads the notifications it names, not the backlog beside them", async () => {
    const tag = guid().slice(0, 8)
    await notifications(BACKLOG, `backlog-${tag}`, 'sent', new Date().toISOString())
    const mine = await notifications(2, `mine-${tag}`, 'sent', new Date().toISOString())
    await env.DB.prepare('UPDATE notifications SET count_mark = 7 WHERE id IN (SELECT value FROM json_each(?1))')
      .bind(JSON.stringify(mine))
      .run()
    const before = await env.DB.prepare(
      `SELECT coalesce(sum(value), 0) AS n FROM counters WHERE name = 'notify_notifications_total'
         AND labels = json_object('channel', 'email', 'kind', 'InvitationCreated', 'status', 'sent')`,
    ).first<{ n: number }>()
    const cost = noCost()
    const db = meteredD1(env.DB, cost)
    await db.batch(countChanges(db, [...mine.map((id) => ({ id, mark: 7, status: 'sent' }))]))
    expect(cost.d1RowsRead).toBeLessThan(BACKLOG)
    expect(cost.d1RowsWritten).toBe(1)
    const after = await env.DB.prepare(
      `SELECT coalesce(sum(value), 0) AS n FROM counters WHERE name = 'notify_notifications_total'
         AND labels = json_object('channel', 'email', 'kind', 'InvitationCreated', 'status', 'sent')`,
    ).first<{ n: number }>()
    expect((after?.n ?? 0) - (before?.n ?? 0)).toBe(2)
  })
})

describe("what the cron's searches read", () => {
  it('the search for lost notifications reads the due and the sending ones, not every notification ever written', async () => {
    const tag = guid().slice(0, 8)
    // The run is an hour back, so that the pending notifications other tests left, due now, are not due.
    const now = new Date(Date.now() - 3_600_000)
    const cutoff = new Date(now.getTime() - 120_000).toISOString()
    const longAgo = new Date(now.getTime() - 3_600_000).toISOString()
    // History (sent long ago), and notifications not due yet.
    await notifications(BACKLOG, `sent-${tag}`, 'sent', longAgo)
    await notifications(BACKLOG, `later-${tag}`, 'pending', new Date(Date.now() + 86_400_000).toISOString())
    const [lost] = await notifications(1, `lost-${tag}`, 'pending', longAgo)
    await env.DB.prepare('UPDATE notifications SET enqueued_at = NULL WHERE id = ?1').bind(lost).run()
    const result = await selectStuckNotifications(env.DB, now.toISOString(), cutoff, 100).all<{ id: string }>()
    expect(result.results.map((row) => row.id)).toContain(lost)
    // 3 rows through the status index; the scan of the whole table read 1,008 here.
    expect(result.meta.rows_read).toBeLessThan(BACKLOG)
  })

  it('resolving unknown outcomes when there is none reads nothing of the delivery events', async () => {
    const tag = guid().slice(0, 8)
    const now = new Date().toISOString()
    // Events of messages no notification claims: notification_id NULL, the ones the resolution looks at.
    await env.DB.batch(
      Array.from({ length: BACKLOG }, (_, index) =>
        env.DB.prepare(
          `INSERT INTO delivery_events
             (provider, provider_event_id, provider_message_id, notification_id, type, status, occurred_at, received_at)
           VALUES ('resend', ?1, ?2, NULL, 'email.delivered', 'delivered', ?3, ?3)`,
        ).bind(`evt-${index}-${tag}`, `msg-${index}-${tag}`, now),
      ),
    )
    const cost = noCost()
    await resolveUnknownOutcomes(meteredD1(env.DB, cost), now, '["cloudflare"]', '["resend"]')
    // None: no notification is unknown. Its first statement scanned every delivery event: 204 here.
    expect(cost.d1RowsRead).toBeLessThan(BACKLOG)
  })
})

describe("what the console's page views read", () => {
  it('the counts of what waits stop at their cap, reading no further into a backlog', async () => {
    const tag = guid().slice(0, 8)
    await notifications(BACKLOG, `paused-${tag}`, 'paused', new Date().toISOString())
    const cap = 20
    const result = await cappedStatusCounts(env.DB, ['paused', 'closing'], cap).run<{ status: string; n: number }>()
    // Past the cap: one more than it, so the page can say "20+"; a status with none reads 0.
    expect(result.results).toEqual([
      { status: 'paused', n: cap + 1 },
      { status: 'closing', n: 0 },
    ])
    // 21 index entries and the two list items; uncapped, every paused notification (200 and more).
    expect(result.meta.rows_read).toBeLessThan(2 * cap)
  })
})

describe("what the transports' share of the mail reads", () => {
  it("the last hour's sends by transport read the hour's sent emails, not every sent one kept", async () => {
    const tag = guid().slice(0, 8)
    const now = new Date()
    /** Marks these notifications emails sent through `transport` `minutesAgo` minutes before now. */
    const sentThrough = (ids: string[], transport: string, minutesAgo: number) =>
      env.DB.prepare(
        `UPDATE notifications SET channel = 'email', transport = ?2, sent_at = ?3
         WHERE id IN (SELECT value FROM json_each(?1))`,
      )
        .bind(JSON.stringify(ids), transport, new Date(now.getTime() - minutesAgo * 60_000).toISOString())
        .run()
    // History: the emails sent before the hour, which a deployment keeps for weeks.
    await sentThrough(await notifications(BACKLOG, `history-${tag}`, 'sent', now.toISOString()), `a-${tag}`, 90)
    await sentThrough(await notifications(2, `recent-a-${tag}`, 'sent', now.toISOString()), `a-${tag}`, 10)
    await sentThrough(await notifications(1, `recent-b-${tag}`, 'sent', now.toISOString()), `b-${tag}`, 59)
    // An email that failed within the hour (a time in sent_at all the same) is not counted.
    await sentThrough(await notifications(1, `failed-${tag}`, 'failed', now.toISOString()), `a-${tag}`, 5)
    const result = await sentLastHour(env.DB, now).all<{ transport: string; sent: number }>()
    expect(result.results.filter((row) => row.transport.endsWith(tag))).toEqual([
      { transport: `a-${tag}`, sent: 2 },
      { transport: `b-${tag}`, sent: 1 },
    ])
    // The hour's entries of the index of sent emails: 6 rows read here. Left to itself, SQLite took the
    // status index and read every sent notification: 206.
    expect(result.meta.rows_read).toBeLessThan(BACKLOG)
  })
})

describe('the indexes statements name', () => {
  // The source of every module, read at build time, so the test finds each `INDEXED BY` as written.
  const sources = import.meta.glob('../src/**/*.ts', { query: '?raw', import: 'default', eager: true }) as Record<
    string,
    string
  >

  it('every index a statement names with INDEXED BY exists once the migrations ran (a table rebuild must recreate it)', async () => {
    const named = new Set(
      Object.values(sources).flatMap((source) => [...source.matchAll(/INDEXED BY (\w+)/g)].map((m) => m[1])),
    )
    // The two of today, so that a glob finding nothing cannot pass.
    expect([...named].sort()).toEqual(expect.arrayContaining(['notifications_awaiting', 'notifications_unpruned']))
    const { results } = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'index'").all<{
      name: string
    }>()
    const existing = new Set(results.map((row) => row.name))
    expect([...named].filter((name) => !existing.has(name as string))).toEqual([])
  })
})
