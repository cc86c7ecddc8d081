/**
 * Growing the D1 shards from N to 2N databases (docs/scaling.md, "Adding
 * shards"). A bucket's shard is the bucket modulo the count, so doubling it
 * keeps every bucket where it was or moves it up by N: each old shard `s`
 * gives part of its rows to the new, empty shard `s + N`, and no old shard
 * receives anything. The move runs while nothing else writes (the queues'
 * delivery paused, DB_SHARDS_GROWING_TO holding the cron, the consumers and
 * the operator's changes), a bounded page per call: each page is copied into
 * the new shard (a row already there is left as it is) and only then deleted
 * from the old one, so a call that fails halfway is simply made again.
 */

import { configOf } from '../config.ts'
import { BUCKETS, bucketOfId, shardDatabases, shardOfRecipient } from '../d1/shards.ts'
import { ApiError } from '../errors.ts'
import { FINAL_STATUSES } from '../notifications/status.ts'

/** The per-recipient tables keyed by user id: each user's rows move with them. */
const USER_TABLES = ['contacts', 'preferences', 'throttle_windows'] as const

/**
 * Tables every shard keeps whole: copied, not moved — an address's
 * suppression and an erasure's pseudonyms (a recipient at the address may be
 * in any shard), a transport's pause (the new shard's notifications wait
 * for it as the old shard's do), and the keys cancelled (an event of one
 * that comes late creates nothing, whatever shard its recipient moved to). Paged by position, not by key: a page's
 * place must not be an address (the cursor is kept in the primary and sent
 * back and forth), and nothing else writes them while the shards grow.
 */
const WHOLE_TABLES = [
  { table: 'suppressions', order: 'address' },
  { table: 'erased_addresses', order: 'pseudonym' },
  { table: 'transport_pauses', order: 'transport' },
  { table: 'cancellations', order: 'key' },
] as const

/** What a grow moves from each old shard, in order. */
export const GROW_PHASES = [
  'contacts',
  'preferences',
  'throttle_windows',
  'notifications',
  'dead_letters',
  'suppressions',
  'erased_addresses',
  'transport_pauses',
  'cancellations',
] as const satisfies readonly (
  | (typeof USER_TABLES)[number]
  | 'notifications'
  | 'dead_letters'
  | (typeof WHOLE_TABLES)[number]['table']
)[]

type Phase = (typeof GROW_PHASES)[number]

/** Where a grow is: the old shard it reads, the phase, and the last key done; `finish` once every shard is done. */
export type GrowCursor = { shard: number; phase: Phase; after: string } | { shard: number; phase: 'finish' }

/** What one call did. */
export type GrowStep = {
  /** The next call's cursor; null when the grow is over. */
  cursor: GrowCursor | null
  /** Rows copied into a new shard, by table (a moved row is deleted from its old shard as well). */
  copied: Record<string, number>
}

type Row = Record<string, unknown>

/** The most rows of one table a call reads (and moves). */
export const GROW_PAGE_MAX = 500

/**
 * The most bytes of rows one insert carries (as one JSON parameter): D1 takes
 * a string of up to 2 MB (https://developers.cloudflare.com/d1/platform/limits/),
 * and a page of notifications with their sent MIME may hold far more.
 */
const INSERT_BYTES = 900_000

/**
 * One page of the grow from `from` shards to twice as many: `cursor` null
 * starts it, after checking that every new shard is empty.
 */
export async function growStep(env: Env, from: number, cursor: GrowCursor | null, limit: number): Promise<GrowStep> {
  const to = from * 2
  const dbs = shardDatabases(env, to)
  const now = new Date().toISOString()
  if (cursor === null) {
    await requireEmpty(dbs.slice(from), from)
    return { cursor: { shard: 0, phase: GROW_PHASES[0], after: '' }, copied: {} }
  }
  if (cursor.phase === 'finish') {
    await finish(dbs, from, now)
    return { cursor: null, copied: {} }
  }
  const source = dbs[cursor.shard] as D1Database
  const target = dbs[cursor.shard + from] as D1Database
  const moving = cursor.shard + from
  // Before the first page of notifications: no bundle may be split between the two shards.
  if (cursor.phase === 'notifications' && cursor.after === '') {
    // Decided as any unknown outcome is: the provider's delivery events first, UNKNOWN_OUTCOME_SECONDS for them.
    const decideAt = new Date(Date.now() + configOf(env).UNKNOWN_OUTCOME_SECONDS * 1000).toISOString()
    await unbundleSplit(source, to, moving, now, decideAt)
  }
  const page = await pageOf(source, cursor.phase, cursor.after, limit, to, moving)
  const copied: Record<string, number> = {}
  const inserts = page.copy.flatMap(({ table, rows }) =>
    insertsOf(target, table, rows).map((statement) => ({ table, statement })),
  )
  if (inserts.length > 0) {
    const results = await target.batch(inserts.map(({ statement }) => statement))
    inserts.forEach(({ table }, index) => {
      // The rows it returns are those it inserted: D1's `changes` would count the counting triggers' rows too.
      copied[table] = (copied[table] ?? 0) + (results[index]?.results.length ?? 0)
    })
  }
  if (page.remove.length > 0) await source.batch(page.remove.map((statement) => statement(source)))
  return { cursor: page.last === null ? nextPhase(cursor, from) : { ...cursor, after: page.last }, copied }
}

/** The phase after this one, the next old shard's first, or `finish`. */
function nextPhase(cursor: { shard: number; phase: Phase }, from: number): GrowCursor {
  const index = GROW_PHASES.indexOf(cursor.phase)
  if (index + 1 < GROW_PHASES.length) return { shard: cursor.shard, phase: GROW_PHASES[index + 1] as Phase, after: '' }
  if (cursor.shard + 1 < from) return { shard: cursor.shard + 1, phase: GROW_PHASES[0], after: '' }
  return { shard: 0, phase: 'finish' }
}

type Page = {
  /** The page's rows to copy, by table. */
  copy: { table: string; rows: Row[] }[]
  /** Statements that delete the moving ones from the old shard. */
  remove: ((db: D1Database) => D1PreparedStatement)[]
  /** The last key read (or position), or null when the phase is over. */
  last: string | null
}

async function pageOf(db: D1Database, phase: Phase, after: string, limit: number, to: number, moving: number) {
  if ((USER_TABLES as readonly string[]).includes(phase)) return userPage(db, phase, after, limit, to, moving)
  if (phase === 'notifications') return notificationPage(db, after, limit, to, moving)
  if (phase === 'dead_letters') return deadLetterPage(db, after, limit, to, moving)
  const { order } = WHOLE_TABLES.find(({ table }) => table === phase) as (typeof WHOLE_TABLES)[number]
  return wholePage(db, phase, order, Number(after || 0), limit)
}

/** Users of a table, a page of them: the rows of those whose shard is the new one move. */
async function userPage(db: D1Database, table: string, after: string, limit: number, to: number, moving: number) {
  const { results: users } = await db
    .prepare(`SELECT DISTINCT user_id FROM ${table} WHERE user_id > ?1 ORDER BY user_id LIMIT ?2`)
    .bind(after, limit)
    .all<{ user_id: string }>()
  const shards = await Promise.all(users.map(({ user_id }) => shardOfRecipient(user_id, to)))
  const movers = users.filter((_, index) => shards[index] === moving).map(({ user_id }) => user_id)
  const page: Page = { copy: [], remove: [], last: users.length < limit ? null : (users.at(-1)?.user_id ?? null) }
  if (movers.length === 0) return page
  page.copy = [{ table, rows: await rowsWhere(db, table, 'user_id', movers) }]
  page.remove = [(source) => deleteWhere(source, table, 'user_id', movers)]
  return page
}

/**
 * Notifications, a page of ids: one whose id carries a bucket of the new
 * shard moves, with its sent message and delivery events; the processed
 * marks of its event and its bundle's row are copied (the old shard may still
 * hold other recipients of either). An id without a bucket stays in the
 * primary, where such ids are looked for.
 */
async function notificationPage(db: D1Database, after: string, limit: number, to: number, moving: number) {
  const { results: ids } = await db
    .prepare('SELECT id FROM notifications WHERE id > ?1 ORDER BY id LIMIT ?2')
    .bind(after, limit)
    .all<{ id: string }>()
  const movers = ids.map(({ id }) => id).filter((id) => movesTo(bucketOfId(id), to, moving))
  const page: Page = { copy: [], remove: [], last: ids.length < limit ? null : (ids.at(-1)?.id ?? null) }
  if (movers.length === 0) return page
  const notifications = await rowsWhere(db, 'notifications', 'id', movers)
  const [sent, events, marks, bundles] = await Promise.all([
    rowsWhere(db, 'sent_messages', 'notification_id', movers),
    rowsWhere(db, 'delivery_events', 'notification_id', movers),
    rowsWhere(db, 'processed_marks', 'event_id', unique(notifications.map((row) => row.event_id))),
    rowsWhere(db, 'send_batches', 'id', unique(notifications.map((row) => row.batch_id))),
  ])
  page.copy = [
    { table: 'processed_marks', rows: marks },
    { table: 'send_batches', rows: bundles },
    { table: 'notifications', rows: notifications },
    { table: 'sent_messages', rows: sent },
    { table: 'delivery_events', rows: events },
  ]
  page.remove = [
    (source) => deleteWhere(source, 'delivery_events', 'notification_id', movers),
    (source) => deleteWhere(source, 'sent_messages', 'notification_id', movers),
    (source) => deleteWhere(source, 'notifications', 'id', movers),
  ]
  return page
}

/**
 * A bundle (one provider request under one idempotency key, src/notifications/bundles.ts)
 * whose unfinished members would end in two shards: each shard would retry
 * its part under the bundle's key, and the provider would refuse the second
 * part as another payload for the same key — taken as sent, never sent.
 * So before its notifications move, every such bundle of the old shard is
 * undone: a member that may have gone out (the bundle was sent, or may have
 * been) waits `unknown`, settled by the provider's delivery events as any
 * send whose outcome is not known; one that cannot have gone out is sent
 * again on its own, in a new bundle.
 */
async function unbundleSplit(db: D1Database, to: number, moving: number, now: string, decideAt: string): Promise<void> {
  const { results } = await db
    .prepare(
      `SELECT b.id, b.batch_id, (b.status IN (${FINAL_LIST})) AS final,
              (b.maybe_sent_at IS NOT NULL OR b.provider_id IS NOT NULL OR b.status = 'sent') AS went
       FROM notifications b
       WHERE b.batch_id IN (SELECT batch_id FROM notifications WHERE batch_id IS NOT NULL AND NOT status IN (${FINAL_LIST}))`,
    )
    .all<{ id: string; batch_id: string; final: number; went: number }>()
  const split: string[] = []
  const mayHaveGone: string[] = []
  for (const [, members] of Map.groupBy(results, (row) => row.batch_id)) {
    const sides = new Set(members.map((member) => movesTo(bucketOfId(member.id), to, moving)))
    if (sides.size < 2) continue
    const open = members.filter((member) => member.final === 0).map((member) => member.id)
    if (members.some((member) => member.went === 1)) mayHaveGone.push(...open)
    else split.push(...open)
  }
  if (split.length === 0 && mayHaveGone.length === 0) return
  await db.batch([
    db
      .prepare(
        `UPDATE notifications SET batch_id = NULL, batch_position = NULL, updated_at = ?2
         WHERE id IN (SELECT value FROM json_each(?1))`,
      )
      .bind(JSON.stringify(split), now),
    db
      .prepare(
        `UPDATE notifications SET status = 'unknown', error_code = 'NTF_SEND_UNKNOWN',
           status_reason = 'its bundle was split by growing the D1 shards: whether it went out is not known',
           batch_id = NULL, batch_position = NULL, lease_until = NULL, claim_token = NULL,
           maybe_sent_at = coalesce(maybe_sent_at, ?2), scheduled_at = ?3, updated_at = ?2
         WHERE id IN (SELECT value FROM json_each(?1))`,
      )
      .bind(JSON.stringify(mayHaveGone), now, decideAt),
  ])
}

const FINAL_LIST = FINAL_STATUSES.map((status) => `'${status}'`).join(', ')

/** Dead letters, a page: one of notify-dispatch moves with its notification; the others stay. */
async function deadLetterPage(db: D1Database, after: string, limit: number, to: number, moving: number) {
  const { results } = await db
    .prepare(
      `SELECT id, queue, json_extract(body, '$.notificationId') AS notification FROM dead_letters
       WHERE id > ?1 ORDER BY id LIMIT ?2`,
    )
    .bind(after, limit)
    .all<{ id: string; queue: string; notification: unknown }>()
  const movers = results
    .filter(
      ({ queue, notification }) =>
        queue === 'notify-dispatch' &&
        typeof notification === 'string' &&
        movesTo(bucketOfId(notification), to, moving),
    )
    .map(({ id }) => id)
  const page: Page = { copy: [], remove: [], last: results.length < limit ? null : String(results.at(-1)?.id) }
  if (movers.length === 0) return page
  page.copy = [{ table: 'dead_letters', rows: await rowsWhere(db, 'dead_letters', 'id', movers) }]
  page.remove = [(source) => deleteWhere(source, 'dead_letters', 'id', movers)]
  return page
}

/** A table every shard keeps whole, a page by position: copied to the new shard, kept in the old. */
async function wholePage(db: D1Database, table: string, order: string, offset: number, limit: number) {
  const { results } = await db
    .prepare(`SELECT * FROM ${table} ORDER BY ${order} LIMIT ?1 OFFSET ?2`)
    .bind(limit, offset)
    .all<Row>()
  return {
    copy: [{ table, rows: results }],
    remove: [],
    last: results.length < limit ? null : String(offset + results.length),
  } satisfies Page
}

/** Whether a bucket's shard is `moving` of `to` shards (an id without a bucket never moves). */
function movesTo(bucket: number | undefined, to: number, moving: number): boolean {
  return bucket !== undefined && bucket < BUCKETS && bucket % to === moving
}

function unique(values: readonly unknown[]): string[] {
  return [...new Set(values.filter((value): value is string => typeof value === 'string'))]
}

async function rowsWhere(db: D1Database, table: string, column: string, values: readonly string[]): Promise<Row[]> {
  if (values.length === 0) return []
  const { results } = await db
    .prepare(`SELECT * FROM ${table} WHERE ${column} IN (SELECT value FROM json_each(?1))`)
    .bind(JSON.stringify(values))
    .all<Row>()
  return results
}

/**
 * Rows as they were, into the same table of another shard, a few hundred
 * kilobytes of them a statement (one JSON parameter each, whatever the
 * number of columns); a row already there stays. Each statement returns a row
 * per row it inserted.
 */
function insertsOf(db: D1Database, table: string, rows: readonly Row[]): D1PreparedStatement[] {
  const statements: D1PreparedStatement[] = []
  let chunk: Row[] = []
  let bytes = 0
  const flush = () => {
    if (chunk.length === 0) return
    const columns = Object.keys(chunk[0] as Row)
    statements.push(
      db
        .prepare(
          `INSERT INTO ${table} (${columns.map((column) => `"${column}"`).join(', ')})
           SELECT ${columns.map((column) => `r.value ->> '$."${column}"'`).join(', ')} FROM json_each(?1) r WHERE true
           ON CONFLICT DO NOTHING RETURNING 1 AS inserted`,
        )
        .bind(JSON.stringify(chunk)),
    )
    chunk = []
    bytes = 0
  }
  for (const row of rows) {
    const size = JSON.stringify(row).length
    if (bytes + size > INSERT_BYTES) flush()
    chunk.push(row)
    bytes += size
  }
  flush()
  return statements
}

function deleteWhere(db: D1Database, table: string, column: string, values: readonly string[]): D1PreparedStatement {
  return db
    .prepare(`DELETE FROM ${table} WHERE ${column} IN (SELECT value FROM json_each(?1))`)
    .bind(JSON.stringify(values))
}

/**
 * The new shards must hold nothing yet: a grow fills them from the old ones,
 * and a row of a recipient already there would mean a grow of another count
 * (or writes with the new count) has begun.
 */
async function requireEmpty(targets: readonly D1Database[], from: number): Promise<void> {
  for (const [index, db] of targets.entries()) {
    // Not preferences: an unsubscribe link writes one to the new count's shard while the shards grow.
    const row = await db
      .prepare('SELECT (SELECT count(*) FROM notifications) + (SELECT count(*) FROM contacts) AS n')
      .first<{ n: number }>()
    if ((row?.n ?? 0) > 0) {
      throw new ApiError(
        'CONFLICT',
        `the new shard ${from + index} already holds recipients' rows: a grow moves them into empty databases only`,
      )
    }
  }
}

/**
 * The counters of the new shards, handed over: the move's inserts were
 * counted by each new shard's triggers (every notification, delivery event
 * and dead letter it received), and /metrics adds up every shard. So each old
 * shard counts that much less — once, recorded in its `shard_grows` in the
 * same transaction — and each new shard's marks of what it has charted start
 * at its counts, so that neither charts the hand-over as traffic.
 */
async function finish(dbs: readonly D1Database[], from: number, now: string): Promise<void> {
  // The primary last: its row is what says the whole grow is over.
  for (let shard = from - 1; shard >= 0; shard -= 1) {
    const source = dbs[shard] as D1Database
    const target = dbs[shard + from] as D1Database
    await target
      .prepare(
        `INSERT INTO counter_marks (name, labels, value) SELECT name, labels, value FROM counters WHERE true
       ON CONFLICT (name, labels) DO UPDATE SET value = excluded.value`,
      )
      .run()
    const { results: counted } = await target
      .prepare('SELECT name, labels, value FROM counters')
      .all<{ name: string; labels: string; value: number }>()
    // One statement per table, whatever the number of label sets: a call's D1 queries are counted.
    const handOver = JSON.stringify(counted.map(({ name, labels, value }) => [name, labels, value]))
    const subtract = (table: string) =>
      source
        .prepare(
          `INSERT INTO ${table} (name, labels, value)
           SELECT c.value ->> 0, c.value ->> 1, -(c.value ->> 2) FROM json_each(?1) c
           WHERE NOT EXISTS (SELECT 1 FROM shard_grows WHERE to_count = ?2 AND finished_at IS NOT NULL)
           ON CONFLICT (name, labels) DO UPDATE SET value = value + excluded.value`,
        )
        .bind(handOver, from * 2)
    await source.batch([
      subtract('counters'),
      subtract('counter_marks'),
      source
        .prepare(
          `INSERT INTO shard_grows (to_count, finished_at) VALUES (?1, ?2)
           ON CONFLICT (to_count) DO UPDATE SET finished_at = coalesce(finished_at, excluded.finished_at)`,
        )
        .bind(from * 2, now),
    ])
  }
}
