import { sha256Hex } from '../crypto.ts'

/** A dead letter as stored in D1 table `dead_letters`. */
export type DeadLetterRow = {
  id: string
  queue: string
  code: string
  error: string
  attempts: number | null
  source: string | null
  origin: string | null
  sourceMessageId: string | null
  eventId: string | null
  eventType: string | null
  kind: string | null
  /** The original queue message, JSON. */
  body: string
  failureId: string
  failedAt: string
}

/**
 * The upsert of a dead letter, with `history` the SQL that gives an existing
 * row its history when it dies again, and `onlyIf` a condition over the
 * database (parameters from ?15) without which nothing is written.
 */
const upsertSql = (history: string, onlyIf = 'true') => `INSERT INTO dead_letters
     (id, queue, code, error, attempts, source, origin, source_message_id, event_id, event_type, body,
      history, failure_id, first_seen, last_seen, kind)
   SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,
      json_array(json_object('at', ?13, 'code', ?3, 'error', ?4, 'attempts', ?5)), ?12, ?13, ?13, ?14
   WHERE ${onlyIf}
   ON CONFLICT (id) DO UPDATE SET
     code = excluded.code,
     error = excluded.error,
     attempts = excluded.attempts,
     kind = coalesce(excluded.kind, dead_letters.kind),
     failure_id = excluded.failure_id,
     last_seen = excluded.last_seen,
     failures = dead_letters.failures + 1,
     history = ${history},
     status = 'open'
   WHERE dead_letters.failure_id <> excluded.failure_id`

function bindRow(statement: D1PreparedStatement, row: DeadLetterRow, ...extra: unknown[]): D1PreparedStatement {
  return statement.bind(
    row.id,
    row.queue,
    row.code,
    row.error,
    row.attempts,
    row.source,
    row.origin,
    row.sourceMessageId,
    row.eventId,
    row.eventType,
    row.body,
    row.failureId,
    row.failedAt,
    row.kind,
    ...extra,
  )
}

/**
 * The id of the dead letter of a message that is not an inbound event: the
 * sha256 of its queue and its body, so that the same message dying again is
 * the same row, whoever writes it (the notify-dlq consumer, or a dispatch
 * writing a notification's dead letter with its status).
 */
export function deadLetterIdOf(queue: string, json: string): Promise<string> {
  return sha256Hex(`${queue}\n${json}`)
}

/**
 * Inserts a dead letter, or, when the same message died before, records the
 * new failure on its row (last error, attempts, history) and opens it again.
 * A redelivery of the same failure (same `failureId`) changes nothing.
 * Parameters: the fields of `DeadLetterRow`, in order.
 */
export function upsertDeadLetter(db: D1Database, row: DeadLetterRow): D1PreparedStatement {
  return bindRow(
    db.prepare(upsertSql(`json_insert(dead_letters.history, '$[#]', json(excluded.history) -> '$[0]')`)),
    row,
  )
}

/**
 * Inserts a dead letter as `upsertDeadLetter` does, only while a notification
 * is in the status that the same D1 batch gave it: a dispatch that lost its
 * claim meanwhile writes neither. Parameters: those of `upsertDeadLetter`,
 * then the notification's id, status and `updated_at`.
 */
export function upsertNotificationDeadLetter(
  db: D1Database,
  row: DeadLetterRow,
  notification: { id: string; status: string; updatedAt: string },
): D1PreparedStatement {
  return bindRow(
    db.prepare(
      upsertSql(
        `json_insert(dead_letters.history, '$[#]', json(excluded.history) -> '$[0]')`,
        'EXISTS (SELECT 1 FROM notifications WHERE id = ?15 AND status = ?16 AND updated_at = ?17)',
      ),
    ),
    row,
    notification.id,
    notification.status,
    notification.updatedAt,
  )
}

/** What a reduced dead letter keeps in place of a body D1 would not store. */
export type ReducedBody = {
  notifyEdgeReduced: 1
  /** Why the whole row could not be written: D1's error. */
  cause: string
  /** UTF-8 bytes and sha256 of the body that was not kept, to recognise it at its origin. */
  bytes: number
  sha256: string
}

/** The reduced body in a stored dead letter's JSON, if it is one. */
export function reducedBodyOf(body: unknown): ReducedBody | undefined {
  const value = body as Partial<ReducedBody> | null
  return typeof value === 'object' && value !== null && value.notifyEdgeReduced === 1
    ? (value as ReducedBody)
    : undefined
}

/**
 * The dead letter again when its whole row cannot be written (D1 refuses one
 * of its values for good): every field but the body, which becomes a
 * `ReducedBody`, and an error that says so. The history starts over with this
 * failure, since a history too long to take one more entry is one way a row
 * stops fitting; a body an earlier failure already stored stays.
 * Parameters: as `upsertDeadLetter`.
 */
export function upsertReducedDeadLetter(db: D1Database, row: DeadLetterRow, reduced: ReducedBody): D1PreparedStatement {
  return bindRow(db.prepare(upsertSql('excluded.history')), {
    ...row,
    error: `${row.error} [stored without its body: ${reduced.cause}]`,
    body: JSON.stringify(reduced),
  })
}

/**
 * Retention of resolved dead letters: deletes the oldest replayed or
 * discarded before `before`, at most `limit`, by primary key from a LIMITed
 * search on `dead_letters_resolved`. An open dead letter waits for an
 * operator however old it is; deleting resolved ones leaves the open-count
 * triggers untouched. Parameters: before, limit.
 */
export function pruneResolvedDeadLetters(db: D1Database, before: string, limit: number): D1PreparedStatement {
  return db
    .prepare(
      `DELETE FROM dead_letters WHERE id IN
         (SELECT id FROM dead_letters WHERE status <> 'open' AND resolved_at < ?1 ORDER BY resolved_at LIMIT ?2)`,
    )
    .bind(before, limit)
}
