/**
 * What the console and `/metrics` read of the email transports, in each D1
 * shard: their pauses and open circuits, and the emails each sent in the
 * last hour — its share of the mail.
 */

/** The window of `sentLastHour`. */
const HOUR_MS = 3_600_000

/** Every pause and open circuit of one D1 database, as the health report shows them. */
export function readPauses(db: D1Database): D1PreparedStatement {
  return db.prepare('SELECT transport, code, reason, since, probe_at FROM transport_pauses ORDER BY transport')
}

/**
 * The emails each transport sent in the hour before `now`, one row
 * `{ transport, sent }` each, by transport. Reads the hour's entries of the
 * index of sent emails (migration 0027), never the older ones: named, as
 * SQLite left to itself takes the status index and reads every sent
 * notification kept (test/query-plans.test.ts).
 */
export function sentLastHour(db: D1Database, now: Date): D1PreparedStatement {
  return db
    .prepare(
      `SELECT transport, count(*) AS sent FROM notifications INDEXED BY notifications_sent_email
       WHERE status = 'sent' AND channel = 'email' AND sent_at >= ?1 AND transport IS NOT NULL
       GROUP BY transport ORDER BY transport`,
    )
    .bind(new Date(now.getTime() - HOUR_MS).toISOString())
}
