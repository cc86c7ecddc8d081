/**
 * How a statement that finds its rows by key names the `status` column, on
 * every table with an index that starts with it (`notifications_due`,
 * `dead_letters_status_seen`).
 */

/**
 * The `status` column as a statement names it when a key finds its rows — the
 * ids of a claim batch (src/notifications/sql.ts, `IN_CLAIM_BATCH`), a JSON
 * list of ids or of idempotency keys — and the status only filters them. The
 * unary `+` keeps SQLite from using an index that starts with the status for
 * it (https://www.sqlite.org/optoverview.html, "Disqualifying WHERE Clause
 * Terms Using Unary-"+""): without it the planner chose that index, read every
 * row of the status and filtered them by the list (a bloom filter in the plan),
 * so each statement read the whole backlog — with it, each key is one lookup
 * by the key's own index. Not for a partial index whose `WHERE` is on the
 * status (`notifications_awaiting`): the `+` hides from SQLite the very term
 * that index needs, so such a statement names its index (`INDEXED BY`).
 * test/claim-batch.test.ts and test/query-plans.test.ts count what these
 * statements read beside a backlog.
 */
export const STATUS_AS_FILTER = '+status'

/**
 * One chunk of a table's retention: deletes the `limit` oldest rows whose
 * `column` is before `before`, by their `key` (a column, or the columns of
 * a primary key of several, comma-separated) from a LIMITed search on the
 * index of `column`, so one chunk is one short write however large the
 * table. The names are the callers' own literals, never input.
 */
export function deleteOldest(
  db: D1Database,
  table: string,
  key: string,
  column: string,
  before: string,
  limit: number,
): D1PreparedStatement {
  return db
    .prepare(
      `DELETE FROM ${table} WHERE (${key}) IN
         (SELECT ${key} FROM ${table} WHERE ${column} < ?1 ORDER BY ${column} LIMIT ?2)`,
    )
    .bind(before, limit)
}
