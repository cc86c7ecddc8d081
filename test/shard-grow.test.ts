/**
 * Growing the D1 shards from one database to two (src/shards/grow.ts), on two
 * databases of their own (GROW_DB, GROW_DB_1: the `two databases` project
 * binds them), so that the Worker before the grow (DB_SHARDS=1), holding
 * (DB_SHARDS_GROWING_TO=2) and after it (DB_SHARDS=2) is the same Worker
 * with another env: what the pipeline wrote with one database, the Worker
 * with two finds, sends once and counts once.
 */
import { applyD1Migrations, createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { beforeAll, describe, expect, it } from 'vitest'
import { bucketOf, shardOfId } from '../src/d1/shards.ts'
import worker from '../src/index.ts'
import { signUnsubscribe } from '../src/preferences/token.ts'
import { deadLetterEnvelope } from '../src/queue/dead-letter-envelope.ts'
import { ADMIN_TOKEN, deliverBatch, freshInbound, guid, runCron } from './helpers.ts'
import { rowsIn, userInShard } from './shards.ts'

const grow = env as unknown as { GROW_DB: D1Database; GROW_DB_1: D1Database }
const DBS = () => [grow.GROW_DB, grow.GROW_DB_1]
const BEFORE = () => ({ DB: grow.GROW_DB, DB_1: grow.GROW_DB_1, DB_SHARDS: '1', DB_SHARDS_GROWING_TO: '0' })
const HOLDING = () => ({ ...BEFORE(), DB_SHARDS_GROWING_TO: '2' })
const AFTER = () => ({ ...BEFORE(), DB_SHARDS: '2' })

/** The tables a test here starts without (the audit trail cannot be deleted, and is not moved). */
const TABLES = [
  'notifications',
  'sent_messages',
  'send_batches',
  'delivery_events',
  'dead_letters',
  'contacts',
  'preferences',
  'suppressions',
  'erased_addresses',
  'throttle_windows',
  'processed_marks',
  'counters',
  'counter_marks',
  'counter_buckets',
  'gauges',
  'shard_grows',
  'transport_pauses',
]

/** A queue binding that keeps what the Worker sends to it. */
function keeper() {
  const messages: unknown[] = []
  return {
    messages,
    send: async (body: unknown) => {
      messages.push(body)
    },
    sendBatch: async (batch: Iterable<MessageSendRequest>) => {
      for (const message of batch) messages.push(message.body)
    },
  }
}

/** The Worker's fetch handler with the env of one side of the grow. */
async function call(overrides: Record<string, unknown>, method: string, path: string, body?: unknown) {
  const ctx = createExecutionContext()
  const response = await worker.fetch(
    new Request(`https://notify-edge.example.workers.dev${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
    { ...env, ...overrides } as Env,
    ctx,
  )
  await waitOnExecutionContext(ctx)
  return response
}

/** Every row of a table in each database, by database. */
function rowsByDb<T = Record<string, unknown>>(sql: string, ...params: unknown[]): Promise<T[][]> {
  return Promise.all(DBS().map((db) => rowsIn<T>(db, sql, ...params)))
}

/** `/metrics`' samples of a counter, as `labels → value`. */
async function samples(overrides: Record<string, unknown>, name: string): Promise<Record<string, number>> {
  const text = await (await call(overrides, 'GET', '/metrics')).text()
  return Object.fromEntries(
    text
      .split('\n')
      .filter((line) => line.startsWith(`${name}{`))
      .map((line) => [line.slice(name.length, line.lastIndexOf(' ')), Number(line.split(' ').at(-1))]),
  )
}

/** A user id whose rows belong to shard `shard` of two. */
const userIn = (shard: number) => userInShard(shard, 2)

/** An invitation to a user, at an address of their own. */
function invitationTo(userId: string) {
  return freshInbound('invitation.created', (value) => {
    const recipient = (value.data as { recipient: Record<string, unknown> }).recipient
    recipient.userId = userId
    recipient.email = `grow-${userId.slice(0, 8)}@example.com`
  })
}

/**
 * Runs the grow to its end, `limit` rows a call, making every call twice (as after an answer that was
 * lost): the rows copied, by table, over every call — a row copied again counts nothing, so each table's
 * sum is the rows that reached the new shard.
 */
async function growAll(limit: number): Promise<Record<string, number>> {
  const copied: Record<string, number> = {}
  let cursor: string | undefined
  for (let calls = 0; calls < 500; calls += 1) {
    // A command line started again mid-way, without a cursor, goes on where the grow is.
    if (calls === 3) {
      const resumed = await call(HOLDING(), 'POST', '/v1/shards/grow', { to: 2, limit })
      expect(((await resumed.json()) as { cursor: string | null }).cursor).toBe(cursor)
    }
    let answer: { cursor: string | null; copied: Record<string, number> } | undefined
    for (let making = 0; making < 2; making += 1) {
      const response = await call(HOLDING(), 'POST', '/v1/shards/grow', { to: 2, limit, ...(cursor ? { cursor } : {}) })
      expect(response.status).toBe(200)
      answer = (await response.json()) as { cursor: string | null; copied: Record<string, number> }
      for (const [table, n] of Object.entries(answer.copied)) copied[table] = (copied[table] ?? 0) + n
    }
    if (answer?.cursor === null) return copied
    cursor = answer?.cursor
  }
  throw new Error('the grow did not end in 500 calls')
}

/** Both databases as a grow starts: empty. */
async function emptied(): Promise<void> {
  for (const db of DBS()) await db.batch(TABLES.map((table) => db.prepare(`DELETE FROM ${table}`)))
}

/** The hold's first sight, long ago: the grow may start. */
const settled = () =>
  grow.GROW_DB.prepare(
    `INSERT INTO shard_grows (to_count, held_at) VALUES (2, '2026-01-01T00:00:00.000Z')
     ON CONFLICT (to_count) DO UPDATE SET held_at = excluded.held_at`,
  ).run()

/** A notification waiting in a bundle of the resend transport, as the dispatch stage leaves one. */
async function bundled(userId: string, batchId: string, position: number, maybeSent: boolean): Promise<string> {
  const id = `ntf_b${await bucketOf(userId)}_${guid().replaceAll('-', '')}`
  const now = new Date().toISOString()
  await grow.GROW_DB.prepare(
    `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id,
       recipient_email, subject, text_body, html_body, template_version, status, scheduled_at, created_at, updated_at,
       batch_id, batch_position, maybe_sent_at, transport)
     VALUES (?1, ?2, ?3, 'http', 'InvitationCreated', 'email', 'normal', ?4, ?5, 'Тема', 'Текст', '<p>Текст</p>', 1,
       'pending', ?6, ?6, ?6, ?7, ?8, ?9, 'resend')`,
  )
    .bind(
      id,
      `test:${id}`,
      guid(),
      userId,
      `b-${userId.slice(0, 8)}@example.com`,
      now,
      batchId,
      position,
      maybeSent ? now : null,
    )
    .run()
  return id
}

beforeAll(async () => {
  for (const db of DBS()) await applyD1Migrations(db, env.TEST_MIGRATIONS)
  await emptied()
})

describe('growing the D1 shards from one database to two', () => {
  it('refuses to start without the hold, and holds changes, the cron and the consumers while it is set', async () => {
    const refused = await call(BEFORE(), 'POST', '/v1/shards/grow', { to: 2 })
    expect(refused.status).toBe(409)
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('DB_SHARDS_GROWING_TO')
    // Held, the first call waits until no invocation from before the hold can still be writing.
    const settling = await call(HOLDING(), 'POST', '/v1/shards/grow', { to: 2 })
    expect(settling.status).toBe(409)
    expect(Number(settling.headers.get('retry-after'))).toBeGreaterThan(15 * 60)
    expect((await rowsByDb('SELECT 1 FROM notifications')).flat()).toHaveLength(0)

    const user = guid()
    const change = await call(HOLDING(), 'PUT', `/v1/preferences/${user}`, {
      preferences: [{ kind: 'ResponseCreated', channel: 'email', enabled: false }],
    })
    expect(change.status).toBe(503)
    expect(change.headers.get('retry-after')).toBe('300')
    expect(((await change.json()) as { error: { code: string } }).error.code).toBe('SHARDS_GROWING')
    expect((await rowsByDb('SELECT 1 FROM preferences WHERE user_id = ?1', user)).flat()).toHaveLength(0)

    await runCron(new Date(), HOLDING())
    expect((await rowsByDb("SELECT 1 FROM gauges WHERE name LIKE '%maintenance_last_run%'")).flat()).toHaveLength(0)

    const dispatch = keeper()
    const held = await deliverBatch(
      [{ id: `held-${guid()}`, attempts: 1, body: invitationTo(user) }],
      'notify-events',
      { ...HOLDING(), DISPATCH: dispatch },
    )
    expect(held.retryBatch.retry).toBe(true)
    expect((await rowsByDb('SELECT 1 FROM notifications WHERE recipient_user_id = ?1', user)).flat()).toHaveLength(0)
  })

  it('moves each recipient to their shard; the Worker with two sends what waited once, tells a redelivery apart, and counts as before', async () => {
    const users = [...(await Promise.all([0, 0, 0].map(userIn))), ...(await Promise.all([1, 1, 1].map(userIn)))]
    const events = users.map(invitationTo)
    // With one database: the invitations materialized, four of them sent, two left waiting (one to move).
    const dispatch = keeper()
    const materialized = await deliverBatch(
      events.map((body) => ({ id: `e-${guid()}`, attempts: 1, body })),
      'notify-events',
      { ...BEFORE(), DISPATCH: dispatch },
    )
    expect(materialized.explicitAcks).toHaveLength(6)
    const waiting = dispatch.messages as { notificationId: string }[]
    const idOf = async (user: string) =>
      (await grow.GROW_DB.prepare('SELECT id FROM notifications WHERE recipient_user_id = ?1')
        .bind(user)
        .first<string>('id')) as string
    const ids = await Promise.all(users.map(idOf))
    const toSend = [0, 1, 3, 4].map((index) => ids[index] as string)
    const later = waiting.filter((message) => !toSend.includes(message.notificationId))
    expect(later).toHaveLength(2)
    await deliverBatch(
      toSend.map((notificationId) => ({ id: `d-${guid()}`, attempts: 1, body: { notificationId } })),
      'notify-dispatch',
      { ...BEFORE(), DISPATCH: keeper() },
    )
    // What else a recipient leaves behind: a contact, a preference, a suppression, an erasure, a dead letter.
    const erasedUser = await userIn(1)
    for (const user of [...users, erasedUser]) {
      await grow.GROW_DB.prepare(
        `INSERT INTO contacts (user_id, email, locale, time_zone, display_name, version, updated_at)
         VALUES (?1, ?2, 'ru-RU', 'Europe/Moscow', 'Тест Пользователь', 1, ?3)`,
      )
        .bind(user, `grow-${user.slice(0, 8)}@example.com`, new Date().toISOString())
        .run()
    }
    for (const user of users) {
      const put = await call(BEFORE(), 'PUT', `/v1/preferences/${user}`, {
        preferences: [{ kind: 'ResponseCreated', channel: 'email', enabled: true, mode: 'instant' }],
      })
      expect(put.status).toBe(200)
    }
    expect(
      (await call(BEFORE(), 'PUT', '/v1/suppressions/grow-suppressed@example.com', { reason: 'asked' })).status,
    ).toBe(200)
    expect((await call(BEFORE(), 'POST', '/v1/erasures', { userId: erasedUser })).status).toBe(200)
    const lettered = ids[4] as string
    const stored = await deliverBatch(
      [
        {
          id: `dlq-${guid()}`,
          attempts: 1,
          body: deadLetterEnvelope(
            'notify-dispatch',
            { id: guid(), attempts: 10, body: { notificationId: lettered } },
            { code: 'NTF_DEPENDENCY_FAILED', error: 'D1 was away' },
          ),
        },
      ],
      'notify-dlq',
      BEFORE(),
    )
    expect(stored.explicitAcks).toHaveLength(1)
    const counted = await samples(BEFORE(), 'notify_notifications_total')
    const open = await samples(BEFORE(), 'notify_dead_letters_open')
    expect(Object.values(counted).reduce((a, b) => a + b, 0)).toBeGreaterThan(0)

    // The grow, two rows a call, every call made twice, once the hold has settled (its first sight, long ago).
    await settled()
    const copied = await growAll(2)
    expect(copied).toMatchObject({
      contacts: 3,
      preferences: 3,
      notifications: 3,
      sent_messages: 2,
      processed_marks: 3,
      dead_letters: 1,
      suppressions: 1,
      erased_addresses: 2,
    })

    // Each row is in its recipient's shard, and in no other.
    const [first, second] = await rowsByDb<{ id: string; recipient_user_id: string }>(
      'SELECT id, recipient_user_id FROM notifications',
    )
    expect(first?.map((row) => row.recipient_user_id).sort()).toEqual(users.slice(0, 3).sort())
    expect(second?.map((row) => row.recipient_user_id).sort()).toEqual(users.slice(3).sort())
    for (const [shard, rows] of [first, second].entries()) {
      for (const row of rows ?? []) expect(shardOfId(row.id, 2)).toBe(shard)
    }
    const preferences = await rowsByDb<{ user_id: string }>('SELECT DISTINCT user_id FROM preferences')
    expect(preferences.map((rows) => rows.map((row) => row.user_id).sort())).toEqual([
      users.slice(0, 3).sort(),
      users.slice(3).sort(),
    ])
    const sent = await rowsByDb<{ notification_id: string }>('SELECT notification_id FROM sent_messages')
    expect(sent.map((rows) => rows.length)).toEqual([2, 2])
    const letters = await rowsByDb("SELECT id FROM dead_letters WHERE queue = 'notify-dispatch'")
    expect(letters.map((rows) => rows.length)).toEqual([0, 1])
    // Suppressions and erased pseudonyms are kept whole by every shard.
    const suppressions = await rowsByDb('SELECT address FROM suppressions')
    expect(suppressions.map((rows) => rows.length)).toEqual([1, 1])
    const erased = await rowsByDb('SELECT pseudonym FROM erased_addresses')
    expect(erased[1]).toEqual(erased[0])
    expect(erased[0]?.length).toBeGreaterThan(0)

    // The Worker with two databases counts each thing once, as before the grow.
    expect(await samples(AFTER(), 'notify_notifications_total')).toEqual(counted)
    expect(await samples(AFTER(), 'notify_dead_letters_open')).toEqual(open)

    // What waited is sent, once, from its new shard; the same events again make nothing new.
    await deliverBatch(
      later.map((body) => ({ id: `d-${guid()}`, attempts: 1, body })),
      'notify-dispatch',
      { ...AFTER(), DISPATCH: keeper() },
    )
    const statuses = await rowsByDb<{ status: string }>('SELECT status FROM notifications')
    expect(statuses.flat().map((row) => row.status)).toEqual(Array(6).fill('sent'))
    expect((await rowsByDb('SELECT 1 FROM sent_messages')).flat()).toHaveLength(6)
    const again = keeper()
    const redelivered = await deliverBatch(
      events.map((body) => ({ id: `e-${guid()}`, attempts: 1, body })),
      'notify-events',
      { ...AFTER(), DISPATCH: again },
    )
    expect(redelivered.explicitAcks).toHaveLength(6)
    expect((await rowsByDb('SELECT 1 FROM notifications')).flat()).toHaveLength(6)
    expect((await rowsByDb('SELECT 1 FROM sent_messages')).flat()).toHaveLength(6)

    // The moved dead letter is resolved where it now is, and the open count falls to what it was less one.
    const listed = (await (await call(AFTER(), 'GET', '/v1/dead-letters?status=open')).json()) as {
      items: { id: string }[]
    }
    expect(listed.items).toHaveLength(1)
    const discard = await call(AFTER(), 'POST', `/v1/dead-letters/${listed.items[0]?.id}/discard`, { reason: 'moved' })
    expect(discard.status).toBe(200)
    const openAfter = await samples(AFTER(), 'notify_dead_letters_open')
    expect(Object.values(openAfter).reduce((a, b) => a + b, 0)).toBe(Object.values(open).reduce((a, b) => a + b, 0) - 1)

    // Started again, the grow is over; one that forgot it was made finds the new shard holding rows.
    const over = await call(HOLDING(), 'POST', '/v1/shards/grow', { to: 2 })
    expect(await over.json()).toEqual({ cursor: null, at: null, copied: {} })
    await grow.GROW_DB.prepare(
      "UPDATE shard_grows SET held_at = '2026-01-01T00:00:00.000Z', cursor = NULL, finished_at = NULL WHERE to_count = 2",
    ).run()
    const twice = await call(HOLDING(), 'POST', '/v1/shards/grow', { to: 2 })
    expect(twice.status).toBe(409)
    expect(((await twice.json()) as { error: { message: string } }).error.message).toContain('already holds')
  })

  it('undoes a bundle the grow would split, keeps a pause and a throttle window, and keeps an unsubscribe made while it waited', async () => {
    await emptied()
    const [stays, moves, staysToo, movesToo] = await Promise.all([userIn(0), userIn(1), userIn(0), userIn(1)])
    // A bundle nothing of went out (paced): its members go on alone. One that may have gone out: unknown.
    const quiet = [
      await bundled(stays as string, 'bundle-quiet', 0, false),
      await bundled(moves as string, 'bundle-quiet', 1, false),
    ]
    const loud = [
      await bundled(staysToo as string, 'bundle-loud', 0, true),
      await bundled(movesToo as string, 'bundle-loud', 1, true),
    ]
    const now = new Date().toISOString()
    await grow.GROW_DB.batch([
      grow.GROW_DB.prepare(
        "INSERT INTO send_batches (id, transport, size, created_at) VALUES ('bundle-quiet', 'resend', 2, ?1)",
      ).bind(now),
      grow.GROW_DB.prepare(
        "INSERT INTO send_batches (id, transport, size, created_at) VALUES ('bundle-loud', 'resend', 2, ?1)",
      ).bind(now),
      grow.GROW_DB.prepare(
        "INSERT INTO throttle_windows (user_id, kind, channel, places) VALUES (?1, 'ResponseCreated', 'email', ?2)",
      ).bind(moves, JSON.stringify([now])),
      grow.GROW_DB.prepare(
        "INSERT INTO transport_pauses (transport, code, reason, since, probe_at, updated_at) VALUES ('resend', '401', 'the key', ?1, ?1, ?1)",
      ).bind(now),
    ])
    // Held and waiting to start: a recipient who moves unsubscribes, through their link (written where the new count looks).
    const token = await signUnsubscribe(
      { userId: moves as string, kind: 'ResponseCreated', channel: 'email' },
      'test-unsubscribe-signing-key-0123456789',
    )
    const unsubscribed = await call(HOLDING(), 'POST', `/u/${token}`)
    expect(unsubscribed.status).toBe(200)
    expect(
      (await rowsByDb('SELECT enabled FROM preferences WHERE user_id = ?1', moves)).map((rows) => rows.length),
    ).toEqual([0, 1])

    await settled()
    const copied = await growAll(3)
    expect(copied).toMatchObject({ notifications: 2, throttle_windows: 1, transport_pauses: 1 })
    // Both bundles were undone before their members moved: neither bundle's row goes with them.
    expect(copied.send_batches ?? 0).toBe(0)
    const rows = await rowsByDb<{ id: string; status: string; batch_id: string | null }>(
      'SELECT id, status, batch_id FROM notifications ORDER BY id',
    )
    const byId = new Map(rows.flat().map((row) => [row.id, row]))
    for (const id of quiet) expect(byId.get(id)).toMatchObject({ status: 'pending', batch_id: null })
    for (const id of loud) expect(byId.get(id)).toMatchObject({ status: 'unknown', batch_id: null })
    for (const [shard, list] of rows.entries()) for (const row of list) expect(shardOfId(row.id, 2)).toBe(shard)
    expect((await rowsByDb('SELECT 1 FROM throttle_windows WHERE user_id = ?1', moves)).map((r) => r.length)).toEqual([
      0, 1,
    ])
    expect((await rowsByDb('SELECT transport FROM transport_pauses')).map((r) => r.length)).toEqual([1, 1])
    const [, opted] = await rowsByDb<{ enabled: number; source: string }>(
      'SELECT enabled, source FROM preferences WHERE user_id = ?1',
      moves,
    )
    expect(opted).toEqual([{ enabled: 0, source: 'unsubscribe' }])
  })
})
