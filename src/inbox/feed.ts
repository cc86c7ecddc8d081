import {
  type Counts,
  type FeedChange,
  type InboxItem,
  type Mark,
  type NewItem,
  NewItemSchema,
  type Target,
} from './item.ts'

/**
 * The feed's tables in its Durable Object's SQLite storage. `seq` orders the
 * items by arrival (pages, newest first); `version` is the change number of
 * an item's last change, so a socket that comes back after change N gets
 * each item changed since, once, in the order of the changes. One `feed` row
 * keeps the feed's name, the counts and the last change number, written in
 * the transaction of every change of the items.
 */
const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS items (
     seq             INTEGER PRIMARY KEY,
     notification_id TEXT NOT NULL UNIQUE,
     kind            TEXT NOT NULL,
     title           TEXT NOT NULL,
     body            TEXT NOT NULL,
     link            TEXT,
     action          TEXT,
     created_at      TEXT NOT NULL,
     seen_at         TEXT,
     read_at         TEXT,
     archived_at     TEXT,
     version         INTEGER NOT NULL
   )`,
  'CREATE INDEX IF NOT EXISTS items_version ON items (version)',
  `CREATE TABLE IF NOT EXISTS feed (
     id      INTEGER PRIMARY KEY CHECK (id = 1),
     feed    TEXT NOT NULL,
     unseen  INTEGER NOT NULL CHECK (unseen >= 0),
     unread  INTEGER NOT NULL CHECK (unread >= 0),
     version INTEGER NOT NULL,
     removed INTEGER NOT NULL DEFAULT 0,
     erased_before TEXT
   )`,
  'CREATE INDEX IF NOT EXISTS items_created ON items (created_at)',
  // The notifications withdrawn by a cancellation: their items are gone, and a delivery that was in flight
  // during the cancellation brings none of them back.
  `CREATE TABLE IF NOT EXISTS withdrawn (
     notification_id TEXT PRIMARY KEY,
     withdrawn_at    TEXT NOT NULL
   )`,
  // Each escalation decided here, by the in-app notification whose item decided it: asked again (a
  // redelivered message, a write that failed after the answer), the feed answers what it answered.
  `CREATE TABLE IF NOT EXISTS escalations (
     notification_id TEXT PRIMARY KEY,
     decided_at      TEXT NOT NULL,
     email           INTEGER NOT NULL CHECK (email IN (0, 1))
   )`,
  // A feed made again (after an erasure emptied the object) has another name: a client that held the
  // old one is told to start over rather than trust change numbers that began again.
  'INSERT OR IGNORE INTO feed (id, feed, unseen, unread, version) VALUES (1, lower(hex(randomblob(8))), 0, 0, 0)',
]

type ItemRow = {
  seq: number
  notification_id: string
  kind: string
  title: string
  body: string
  link: string | null
  action: string | null
  created_at: string
  seen_at: string | null
  read_at: string | null
  archived_at: string | null
  version: number
}

type FeedRow = { unseen: number; unread: number; version: number }

/**
 * The feed's name (random, made with it), its counts, its last change number,
 * and the change number of the last removal of items (retention): a client
 * that last saw a change before it holds items that are gone.
 */
export type FeedState = Counts & { feed: string; version: number; removed: number }

/**
 * What each mark changes: the items it finds (those without it), and how many
 * of those leave each count. An archived item counts in neither; reading an
 * item sees it too.
 */
const MARKING: Record<Mark, { without: string; set: string; unseen: string; unread: string }> = {
  seen: {
    without: 'seen_at IS NULL',
    set: 'seen_at = ?1',
    unseen: 'archived_at IS NULL',
    unread: '0',
  },
  read: {
    without: 'read_at IS NULL',
    set: 'read_at = ?1, seen_at = coalesce(seen_at, ?1)',
    unseen: 'archived_at IS NULL AND seen_at IS NULL',
    unread: 'archived_at IS NULL',
  },
  archived: {
    without: 'archived_at IS NULL',
    set: 'archived_at = ?1',
    unseen: 'seen_at IS NULL',
    unread: 'read_at IS NULL',
  },
}

/** When a notification's item was seen, read and archived (null: not yet). */
export type ItemMarks = { id: string; seenAt: string | null; readAt: string | null; archivedAt: string | null }

/**
 * What the feed decided for an email that waited on an item: whether it goes
 * (`email`), when the feed decided, and the item's marks as they were then
 * (null when it did not hold the item).
 */
export type EscalationDecision = {
  email: boolean
  decidedAt: string
  seenAt: string | null
  readAt: string | null
}

/** The most items a page or a catch-up message holds. */
export const PAGE_MAX = 100

function itemOf(row: ItemRow): InboxItem {
  return {
    id: row.notification_id,
    kind: row.kind,
    title: row.title,
    body: row.body,
    link: row.link,
    action: row.action === null ? null : (JSON.parse(row.action) as InboxItem['action']),
    seq: row.seq,
    createdAt: row.created_at,
    seenAt: row.seen_at,
    readAt: row.read_at,
    archivedAt: row.archived_at,
    version: row.version,
  }
}

/**
 * One recipient's feed over its Durable Object's SQL storage. Every method is
 * synchronous: the object runs each whole before the next (no await inside),
 * and a change's rows and counts are written in one `transactionSync`, so
 * the counts can never disagree with the items.
 */
export class Feed {
  readonly #storage: DurableObjectStorage

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage
    for (const statement of SCHEMA) storage.sql.exec(statement)
  }

  get #sql(): SqlStorage {
    return this.#storage.sql
  }

  #feed(): FeedState {
    return this.#sql.exec<FeedState>('SELECT feed, unseen, unread, version, removed FROM feed WHERE id = 1').one()
  }

  /** The feed's name, its counts and its last change number. */
  state(): FeedState {
    return this.#feed()
  }

  /** How many items changed after change number `after` (at most `limit` + 1 are counted). */
  changedSince(after: number, limit: number): number {
    return this.#sql
      .exec<{ n: number }>(
        'SELECT count(*) AS n FROM (SELECT 1 FROM items WHERE version > ?1 LIMIT ?2)',
        after,
        limit + 1,
      )
      .one().n
  }

  /**
   * Adds a notification's item, once: an item of a notification the feed
   * already holds (a redelivered dispatch message), or of one made before the
   * feed was erased, changes nothing and answers undefined.
   */
  add(input: NewItem): FeedChange | undefined {
    const item = NewItemSchema.parse(input)
    return this.#storage.transactionSync(() => {
      // A notification made before the feed was erased is the erased person's: a delivery that was in flight
      // during the erasure brings nothing of it back.
      const last = this.#sql
        .exec<{ erased: string | null; version: number }>(
          'SELECT erased_before AS erased, version FROM feed WHERE id = 1',
        )
        .one()
      if (last.erased !== null && item.notifiedAt !== undefined && item.notifiedAt < last.erased) return undefined
      const withdrawn = this.#sql
        .exec('SELECT 1 FROM withdrawn WHERE notification_id = ?1', item.notificationId)
        .toArray()
      if (withdrawn.length > 0) return undefined
      const version = last.version + 1
      const inserted = this.#sql.exec<ItemRow>(
        `INSERT INTO items (seq, notification_id, kind, title, body, link, action, created_at, version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?1)
         ON CONFLICT (notification_id) DO NOTHING
         RETURNING *`,
        version,
        item.notificationId,
        item.kind,
        item.title,
        item.body,
        item.link,
        item.action === null ? null : JSON.stringify(item.action),
        item.createdAt,
      )
      const row = inserted.toArray()[0]
      if (row === undefined) return undefined
      const counts = this.#sql
        .exec<FeedRow>(
          'UPDATE feed SET unseen = unseen + 1, unread = unread + 1, version = ?1 WHERE id = 1 RETURNING unseen, unread, version',
          version,
        )
        .one()
      return { type: 'added', item: itemOf(row), counts: { unseen: counts.unseen, unread: counts.unread }, version }
    })
  }

  /**
   * Puts `mark` on the target's items that lack it, at `at`, and takes them
   * out of the counts they leave. Answers undefined when no item changed (ids
   * of another feed, or items marked already).
   */
  mark(mark: Mark, target: Target, at: string): FeedChange | undefined {
    const how = MARKING[mark]
    const all = 'all' in target
    // The target's ids as one JSON list, bound at `place`.
    const which = (place: number) =>
      all ? how.without : `${how.without} AND notification_id IN (SELECT value FROM json_each(?${place}))`
    const ids = all ? [] : [JSON.stringify(target.ids)]
    return this.#storage.transactionSync(() => {
      const left = this.#sql
        .exec<{ changed: number; unseen: number; unread: number }>(
          `SELECT count(*) AS changed, coalesce(sum(${how.unseen}), 0) AS unseen, coalesce(sum(${how.unread}), 0) AS unread
           FROM items WHERE ${which(1)}`,
          ...ids,
        )
        .one()
      if (left.changed === 0) return undefined
      const version = this.#feed().version + 1
      const changed = this.#sql
        .exec<{ notification_id: string }>(
          `UPDATE items SET ${how.set}, version = ?${ids.length + 2} WHERE ${which(2)} RETURNING notification_id`,
          at,
          ...ids,
          version,
        )
        .toArray()
      const counts = this.#sql
        .exec<FeedRow>(
          `UPDATE feed SET unseen = unseen - ?1, unread = unread - ?2, version = ?3 WHERE id = 1
           RETURNING unseen, unread, version`,
          left.unseen,
          left.unread,
          version,
        )
        .one()
      const after = { counts: { unseen: counts.unseen, unread: counts.unread }, version }
      return all
        ? { type: 'marked', mark, at, all: true, ...after }
        : { type: 'marked', mark, at, ids: changed.map((row) => row.notification_id), ...after }
    })
  }

  /**
   * A page of items, newest first: those that arrived before `before` (a
   * `seq` a page gave), archived ones only when asked. `nextBefore` continues.
   */
  page(query: { limit: number; before?: number; archived: boolean }): {
    items: InboxItem[]
    nextBefore: number | null
  } {
    const limit = Math.min(Math.max(1, query.limit), PAGE_MAX)
    const rows = this.#sql
      .exec<ItemRow>(
        `SELECT * FROM items WHERE seq < ?1 AND (?2 OR archived_at IS NULL) ORDER BY seq DESC LIMIT ?3`,
        query.before ?? Number.MAX_SAFE_INTEGER,
        query.archived ? 1 : 0,
        limit + 1,
      )
      .toArray()
    const page = rows.slice(0, limit)
    return { items: page.map(itemOf), nextBefore: rows.length > limit ? (page.at(-1)?.seq ?? null) : null }
  }

  /**
   * The items changed after `after` — a change number, and within it an
   * arrival (`seq`), so that a mark on many items pages too — in the order of
   * their last change, at most `limit`: what a socket missed. Each item comes
   * once, as it is now, with its `seq` to page on.
   */
  since(after: { version: number; seq: number }, limit: number = PAGE_MAX): InboxItem[] {
    return this.#sql
      .exec<ItemRow>(
        `SELECT * FROM items WHERE (version, seq) > (?1, ?2) ORDER BY version, seq LIMIT ?3`,
        after.version,
        after.seq,
        limit,
      )
      .toArray()
      .map(itemOf)
  }

  /**
   * Retention: removes the items that arrived before `before`, at most
   * `limit` of them, oldest first, taking them out of the counts they were
   * in, in one transaction. Answers undefined when none was that old.
   */
  removeOlder(before: string, limit: number): FeedChange | undefined {
    return this.#storage.transactionSync(() => {
      const old = this.#sql
        .exec<{ notification_id: string; seen_at: string | null; read_at: string | null; archived_at: string | null }>(
          `DELETE FROM items WHERE seq IN (SELECT seq FROM items WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)
           RETURNING notification_id, seen_at, read_at, archived_at`,
          before,
          limit,
        )
        .toArray()
      // Decisions and withdrawals live as long as the items they were about.
      this.#sql.exec('DELETE FROM escalations WHERE decided_at < ?1', before)
      this.#sql.exec('DELETE FROM withdrawn WHERE withdrawn_at < ?1', before)
      return old.length === 0 ? undefined : this.#removed(old)
    })
  }

  /**
   * Withdraws the items of these notifications (a cancellation): those the
   * feed holds are removed and leave the counts they were in, and every one
   * of them is refused from now on — an add in flight during the withdrawal
   * adds nothing. Answers the change (`removed`, as retention's) when an item
   * was removed, for the sockets; a client that missed it starts over.
   */
  withdraw(ids: readonly string[], at: string): FeedChange | undefined {
    return this.#storage.transactionSync(() => {
      const list = JSON.stringify(ids)
      this.#sql.exec(
        `INSERT INTO withdrawn (notification_id, withdrawn_at) SELECT value, ?2 FROM json_each(?1) WHERE true
         ON CONFLICT (notification_id) DO NOTHING`,
        list,
        at,
      )
      const gone = this.#sql
        .exec<{ notification_id: string; seen_at: string | null; read_at: string | null; archived_at: string | null }>(
          `DELETE FROM items WHERE notification_id IN (SELECT value FROM json_each(?1))
           RETURNING notification_id, seen_at, read_at, archived_at`,
          list,
        )
        .toArray()
      return gone.length === 0 ? undefined : this.#removed(gone)
    })
  }

  /** Takes removed items out of the counts they were in, under a new change number that is also the last removal's. */
  #removed(
    gone: readonly {
      notification_id: string
      seen_at: string | null
      read_at: string | null
      archived_at: string | null
    }[],
  ): FeedChange {
    const live = gone.filter((row) => row.archived_at === null)
    const version = this.#feed().version + 1
    const counts = this.#sql
      .exec<FeedRow>(
        `UPDATE feed SET unseen = unseen - ?1, unread = unread - ?2, version = ?3, removed = ?3 WHERE id = 1
         RETURNING unseen, unread, version`,
        live.filter((row) => row.seen_at === null).length,
        live.filter((row) => row.read_at === null).length,
        version,
      )
      .one()
    return {
      type: 'removed',
      ids: gone.map((row) => row.notification_id),
      counts: { unseen: counts.unseen, unread: counts.unread },
      version,
    }
  }

  /**
   * When the items of these notifications were seen, read and archived: one
   * entry per item the feed holds; a notification whose item it does not
   * hold (never added, erased, past retention) has none.
   */
  marksOf(ids: readonly string[]): ItemMarks[] {
    return this.#sql
      .exec<{ notification_id: string; seen_at: string | null; read_at: string | null; archived_at: string | null }>(
        `SELECT notification_id, seen_at, read_at, archived_at FROM items
         WHERE notification_id IN (SELECT value FROM json_each(?1))`,
        JSON.stringify(ids),
      )
      .toArray()
      .map((row) => ({
        id: row.notification_id,
        seenAt: row.seen_at,
        readAt: row.read_at,
        archivedAt: row.archived_at,
      }))
  }

  /**
   * Decides, once, at `at`, whether the email waiting on the item of
   * notification `id` goes: not if the item was `unless` (seen, or read) by
   * `deadline` (the end of its wait), else yes — also when the feed does not hold the item (never shown,
   * erased). Asked again, it answers the first decision, whatever the item
   * became since: a mark after the decision never takes back an email that
   * went, nor one before it an email spared.
   */
  escalate(id: string, unless: 'seen' | 'read', at: string, deadline: string = at): EscalationDecision {
    return this.#storage.transactionSync(() => {
      const item = this.#sql
        .exec<{ seen_at: string | null; read_at: string | null }>(
          'SELECT seen_at, read_at FROM items WHERE notification_id = ?1',
          id,
        )
        .toArray()[0]
      const marks = { seenAt: item?.seen_at ?? null, readAt: item?.read_at ?? null }
      const known = this.#sql
        .exec<{ decided_at: string; email: number }>(
          'SELECT decided_at, email FROM escalations WHERE notification_id = ?1',
          id,
        )
        .toArray()[0]
      if (known) return { email: known.email === 1, decidedAt: known.decided_at, ...marks }
      const mark = unless === 'seen' ? marks.seenAt : marks.readAt
      // By the end of the wait: a mark after it, before a late wake-up (a retry, the cron's grace), spares nothing.
      const spared = mark !== null && mark <= deadline
      this.#sql.exec(
        'INSERT INTO escalations (notification_id, decided_at, email) VALUES (?1, ?2, ?3)',
        id,
        at,
        spared ? 0 : 1,
      )
      return { email: !spared, decidedAt: at, ...marks }
    })
  }

  /** Records that the feed was erased at `at`: no notification made before it is added again. */
  erasedAt(at: string): void {
    this.#sql.exec('UPDATE feed SET erased_before = ?1 WHERE id = 1', at)
  }

  /** When the oldest escalation decision or withdrawal was recorded, if the feed keeps any. */
  oldestRecord(): string | undefined {
    return (
      this.#sql
        .exec<{ at: string | null }>(
          `SELECT min(at) AS at FROM (SELECT min(decided_at) AS at FROM escalations
                                      UNION ALL SELECT min(withdrawn_at) FROM withdrawn)`,
        )
        .one().at ?? undefined
    )
  }

  /** When the oldest item arrived, if the feed has any. */
  oldest(): string | undefined {
    return this.#sql.exec<{ at: string | null }>('SELECT min(created_at) AS at FROM items').one().at ?? undefined
  }

  /** The counts as the items say, counted afresh: what the kept counts must always equal. */
  recount(): Counts {
    return this.#sql
      .exec<Counts>(
        `SELECT coalesce(sum(seen_at IS NULL AND archived_at IS NULL), 0) AS unseen,
                coalesce(sum(read_at IS NULL AND archived_at IS NULL), 0) AS unread
         FROM items`,
      )
      .one()
  }
}
