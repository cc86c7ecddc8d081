/**
 * The last answer of a slow outside check, kept in D1 table `health_checks`
 * (migration 0016) and reused for a minute: every console page shows the
 * doctor's findings, and asking Resend about the sender's domain on each of
 * them would cost a round trip to Resend per page view (up to the check's
 * 3 s timeout) and requests against the team's rate limit that sending
 * shares. `GET /v1/health/config` and `doctor` always ask, and leave their
 * answer here for the console.
 */
import type { DomainCheck } from './types.ts'

/** How long the console reuses an answer. */
export const REMEMBER_MS = 60_000

/** A check's answer and when it was given. */
export type Remembered = { result: DomainCheck; checkedAt: string }

/** The answer stored under `name`, if one is younger than REMEMBER_MS at `now`; undefined if none or D1 fails. */
export async function recalled(db: D1Database, name: string, now: Date): Promise<Remembered | undefined> {
  try {
    const row = await db
      .prepare('SELECT result, checked_at FROM health_checks WHERE name = ?1 AND checked_at > ?2')
      .bind(name, new Date(now.getTime() - REMEMBER_MS).toISOString())
      .first<{ result: string; checked_at: string }>()
    return row ? { result: JSON.parse(row.result) as DomainCheck, checkedAt: row.checked_at } : undefined
  } catch {
    return undefined
  }
}

/** Keeps `result` under `name` as given at `now`. A failed write only means the next page asks again. */
export async function remember(db: D1Database, name: string, result: DomainCheck, now: Date): Promise<void> {
  await db
    .prepare(
      `INSERT INTO health_checks (name, result, checked_at) VALUES (?1, ?2, ?3)
       ON CONFLICT (name) DO UPDATE SET result = excluded.result, checked_at = excluded.checked_at`,
    )
    .bind(name, JSON.stringify(result), now.toISOString())
    .run()
    .catch(() => undefined)
}
