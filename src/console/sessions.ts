/**
 * The console's sessions in D1 (`console_sessions`, migration 0017): the
 * server's word on whether a signed cookie still opens the console. A
 * session is live while it was not ended (signing out, "sign out everyone"),
 * was used within the idle time, and is younger than its lifetime; each use
 * renews it, so an operator at work stays signed in and an abandoned tab
 * does not.
 */

/** How long a session lives: idle (sliding) and at most (from its opening), in ms. */
export type SessionLimits = { idleMs: number; lifetimeMs: number }

/** A live session, with the idle bound and the lifetime's as parameters number `idle` and `born`. */
const liveAt = (idle: number, born: number) => `ended_at IS NULL AND seen_at > ?${idle} AND created_at > ?${born}`

/** The idle and lifetime bounds at `now`, as stored times: a session seen after the one, opened after the other, is live. */
function boundsAt(now: Date, limits: SessionLimits): { idle: string; born: string } {
  return {
    idle: new Date(now.getTime() - limits.idleMs).toISOString(),
    born: new Date(now.getTime() - limits.lifetimeMs).toISOString(),
  }
}

/** A new session's row. Parameters: id, name, role, now. */
export function insertSession(
  db: D1Database,
  session: { id: string; name: string; role: 'admin' | 'viewer' },
  now: Date,
): D1PreparedStatement {
  return db
    .prepare('INSERT INTO console_sessions (id, name, role, created_at, seen_at) VALUES (?1, ?2, ?3, ?4, ?4)')
    .bind(session.id, session.name, session.role, now.toISOString())
}

/**
 * Whether session `id` is live at `now`, renewing it if so — in one D1 round
 * trip of two statements: the renewal writes `seen_at` only when it is more
 * than a minute old (a page that refreshes itself must not write D1 on every
 * view; an UPDATE that matches a row writes it even to the same value), and
 * the read says whether the session is live.
 */
export async function renewSession(db: D1Database, id: string, now: Date, limits: SessionLimits): Promise<boolean> {
  const { idle, born } = boundsAt(now, limits)
  const live = `id = ?1 AND ${liveAt(2, 3)}`
  const [, found] = await db.batch([
    db
      .prepare(`UPDATE console_sessions SET seen_at = ?4 WHERE ${live} AND seen_at < ?5`)
      .bind(id, idle, born, now.toISOString(), new Date(now.getTime() - 60_000).toISOString()),
    db.prepare(`SELECT 1 AS live FROM console_sessions WHERE ${live}`).bind(id, idle, born),
  ])
  return (found?.results.length ?? 0) > 0
}

/** Ends session `id` (signing out). */
export function endSession(db: D1Database, id: string, now: Date): D1PreparedStatement {
  return db
    .prepare('UPDATE console_sessions SET ended_at = ?2 WHERE id = ?1 AND ended_at IS NULL')
    .bind(id, now.toISOString())
}

/** Ends every session still open ("sign out everyone"); its `changes()` is how many. */
export function endAllSessions(db: D1Database, now: Date): D1PreparedStatement {
  return db.prepare('UPDATE console_sessions SET ended_at = ?1 WHERE ended_at IS NULL').bind(now.toISOString())
}

/** How many sessions are open now: not ended, used within the idle time. */
export async function openSessions(db: D1Database, now: Date, limits: SessionLimits): Promise<number> {
  const { idle, born } = boundsAt(now, limits)
  const row = await db
    .prepare(`SELECT count(*) AS n FROM console_sessions WHERE ${liveAt(1, 2)}`)
    .bind(idle, born)
    .first<{ n: number }>()
  return row?.n ?? 0
}

/**
 * Retention: deletes at most `limit` sessions last used before `before` —
 * every one over by then, ended or idle (a live one was seen within the idle
 * time, far later). Parameters: before, limit.
 */
export function pruneSessions(db: D1Database, before: string, limit: number): D1PreparedStatement {
  return db
    .prepare(
      'DELETE FROM console_sessions WHERE id IN (SELECT id FROM console_sessions WHERE seen_at < ?1 ORDER BY seen_at LIMIT ?2)',
    )
    .bind(before, limit)
}
