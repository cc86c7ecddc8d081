/**
 * Counts the console reads on a page view, bounded: a backlog of a million
 * paused notifications reads "10 000+" at the cost of 10 001 index entries
 * per count, not a million, on every page (and every refresh of the
 * overview). D1 bills rows read; an open overview refreshes itself.
 */

/** The most rows one console count reads, less one. */
export const COUNT_CAP = 10_000

/**
 * One statement counting, per status of `statuses`, the notifications in it,
 * each count stopping at `cap` + 1 entries of the `(status, scheduled_at)`
 * index: rows `{ status, n }`, in the order given. (A correlated subquery per
 * status, not a UNION: D1 refuses a compound SELECT of more than a few terms.)
 */
export function cappedStatusCounts(db: D1Database, statuses: readonly string[], cap = COUNT_CAP): D1PreparedStatement {
  return db
    .prepare(
      `SELECT s.value AS status,
         (SELECT count(*) FROM (SELECT 1 FROM notifications WHERE status = s.value LIMIT ?2)) AS n
       FROM json_each(?1) s ORDER BY s.key`,
    )
    .bind(JSON.stringify(statuses), cap + 1)
}
