import { fromOpaque, toOpaque } from '../opaque.ts'

/** Filters of the dead-letter list and bulk replay. */
export type DeadLetterFilter = {
  status?: string
  code?: string
  queue?: string
  source?: string
  kind?: string
  since?: string
  until?: string
  /** Free text: an exact event id or source message id, or a piece of the error (any case). */
  q?: string
}

/** A position in the (first_seen, id) order. */
export type Cursor = { firstSeen: string; id: string }

/** A dead letter as the API lists it. */
export type DeadLetterSummaryRow = {
  id: string
  queue: string
  code: string
  error: string
  attempts: number | null
  source: string | null
  origin: string | null
  event_id: string | null
  event_type: string | null
  kind: string | null
  status: string
  failures: number
  replays: number
  first_seen: string
  last_seen: string
}

/**
 * The filters of a dead-letter query, by parameter: ?1 status, ?2 code, ?3
 * queue, ?4 source, ?5 kind, ?6 since, ?7 until, and `?{q}` the free text (an
 * event id or source message id exactly, or a piece of the error in any case).
 */
const filterWhere = (
  q: number,
) => `(?1 IS NULL OR status = ?1) AND (?2 IS NULL OR code = ?2) AND (?3 IS NULL OR queue = ?3)
  AND (?4 IS NULL OR source = ?4) AND (?5 IS NULL OR kind = ?5)
  AND (?6 IS NULL OR first_seen >= ?6) AND (?7 IS NULL OR first_seen < ?7)
  AND (?${q} IS NULL OR event_id = ?${q} OR source_message_id = ?${q} OR instr(lower(error), lower(?${q})) > 0)`

/** The bindings ?1 to ?7 of `filterWhere`. */
const filterBindings = (filter: DeadLetterFilter) =>
  [
    filter.status ?? null,
    filter.code ?? null,
    filter.queue ?? null,
    filter.source ?? null,
    filter.kind ?? null,
    filter.since ?? null,
    filter.until ?? null,
  ] as const

const SUMMARY = `id, queue, code, error, attempts, source, origin, event_id, event_type, kind, status, failures, replays,
  first_seen, last_seen`

/**
 * Lists dead letters in a stable keyset order, (first_seen, id): a page starts
 * strictly after the cursor, so rows inserted meanwhile never shift a page.
 * With `bodyBytes`, each row also has `body_bytes`, its body's UTF-8 size.
 * Parameters: status, code, queue, source, kind, since, until, cursor first_seen,
 * cursor id, limit, free text (NULL filters match everything).
 */
export function listDeadLetters(
  db: D1Database,
  filter: DeadLetterFilter,
  options: { cursor?: Cursor; limit: number; order: 'asc' | 'desc'; bodyBytes?: boolean },
): D1PreparedStatement {
  const after = options.order === 'asc' ? '>' : '<'
  // octet_length reads the size SQLite keeps with the value, not the body itself.
  const columns = options.bodyBytes ? `${SUMMARY}, octet_length(body) AS body_bytes` : SUMMARY
  return db
    .prepare(
      `SELECT ${columns} FROM dead_letters
       WHERE ${filterWhere(11)} AND (?8 IS NULL OR (first_seen, id) ${after} (?8, ?9))
       ORDER BY first_seen ${options.order}, id ${options.order}
       LIMIT ?10`,
    )
    .bind(
      ...filterBindings(filter),
      options.cursor?.firstSeen ?? null,
      options.cursor?.id ?? null,
      options.limit,
      filter.q ?? null,
    )
}

/** How many dead letters match the filters (the console's bulk preview). */
export async function countDeadLetters(db: D1Database, filter: DeadLetterFilter): Promise<number> {
  const row = await db
    .prepare(`SELECT count(*) AS n FROM dead_letters WHERE ${filterWhere(8)}`)
    .bind(...filterBindings(filter), filter.q ?? null)
    .first<{ n: number }>()
  return row?.n ?? 0
}

/** The queue and body of each of `ids` (in no order), for a replay. Parameters: JSON array of ids. */
export function bodiesOf(db: D1Database, ids: readonly string[]): D1PreparedStatement {
  return db
    .prepare('SELECT id, queue, body FROM dead_letters WHERE id IN (SELECT value FROM json_each(?1))')
    .bind(JSON.stringify(ids))
}

/** One dead letter, whole. Parameters: id. */
export function getDeadLetter(db: D1Database, id: string): D1PreparedStatement {
  return db.prepare('SELECT * FROM dead_letters WHERE id = ?1').bind(id)
}

/** Dead letters of an event. Parameters: event id. */
export function deadLettersOfEvent(db: D1Database, eventId: string): D1PreparedStatement {
  return db.prepare(`SELECT ${SUMMARY} FROM dead_letters WHERE event_id = ?1 ORDER BY first_seen, id`).bind(eventId)
}

/** Opaque cursor text for a row. */
export function encodeCursor(row: { first_seen: string; id: string }): string {
  return toOpaque([row.first_seen, row.id])
}

/** The cursor in an opaque text, or undefined when it is not one of ours. */
export function decodeCursor(text: string): Cursor | undefined {
  try {
    const [firstSeen, id] = fromOpaque(text) as unknown[]
    return typeof firstSeen === 'string' && typeof id === 'string' ? { firstSeen, id } : undefined
  } catch {
    // A value that cannot be destructured (null, a number, an object) is not one of ours.
    return undefined
  }
}
