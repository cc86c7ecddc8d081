/**
 * What an operator reads about digests: the digest a notification went into
 * (for its event's story and its own page), and the events a digest tells
 * (for the digest's page). Reads only: the writes are in digest.ts. No
 * address, name or content is read — these go into views that show none.
 */

/**
 * How many notifications a digest tells: the size its close wrote, or, while
 * it still collects (or if the close never ran), its members counted now
 * through `notifications_digest`.
 */
const SIZE = `coalesce(d.digest_size,
  (SELECT count(*) FROM notifications m WHERE m.digest_id = d.id))`

/** A digest as the story of one of its members shows it, with its sent message while that is kept. */
export type DigestReferenceRow = {
  id: string
  status: string
  status_reason: string | null
  error_code: string | null
  scheduled_at: string
  sent_at: string | null
  provider_id: string | null
  delivery_status: string | null
  delivery_at: string | null
  size: number
  transport: string | null
  message_id: string | null
  message_sent_at: string | null
}

/** Which notifications' digests to read: those of an event's notifications, or of one notification. */
export type MembersOf = { eventId: string } | { notificationId: string }

/**
 * The digests the given notifications went into (a notification that was not
 * digested names none). Each is found by its id, the members by their event's
 * key or their own id. Parameters: the event id, or the notification id.
 */
export function digestsTelling(db: D1Database, of: MembersOf): D1PreparedStatement {
  const [members, key] =
    'eventId' in of
      ? ['SELECT digest_id FROM notifications WHERE event_id = ?1 AND digest_id IS NOT NULL', of.eventId]
      : ['SELECT digest_id FROM notifications WHERE id = ?1 AND digest_id IS NOT NULL', of.notificationId]
  return db
    .prepare(
      `SELECT d.id, d.status, d.status_reason, d.error_code, d.scheduled_at, d.sent_at, d.provider_id,
         d.delivery_status, d.delivery_at, ${SIZE} AS size,
         s.transport, s.message_id, s.sent_at AS message_sent_at
       FROM notifications d LEFT JOIN sent_messages s ON s.notification_id = d.id
       WHERE d.id IN (${members}) AND d.is_digest = 1`,
    )
    .bind(key)
}

/** One event a digest tells, with `total`: how many it tells in all (counted before the limit). */
export type DigestEventRow = { id: string; event_id: string; kind: string; created_at: string; total: number }

/**
 * The events a digest tells, oldest first as its email lists them, at most
 * `limit` of them, each row with the whole count. Parameters: digest id, limit.
 */
export function eventsOfDigest(db: D1Database, digestId: string, limit: number): D1PreparedStatement {
  return db
    .prepare(
      `SELECT id, event_id, kind, created_at, count(*) OVER () AS total FROM notifications
       WHERE digest_id = ?1 ORDER BY created_at, id LIMIT ?2`,
    )
    .bind(digestId, limit)
}
