import type { DeliveryMode } from '../events/define.ts'
import type { UnsubscribeScope } from './token.ts'

/** One stored choice of a recipient. */
export type Preference = {
  kind: string
  channel: string
  enabled: boolean
  /** How the kind comes when enabled; null: the kind's default. */
  mode: DeliveryMode | null
  /** `unsubscribe`: the recipient, through their link (one-click or its page); `api`: an operator. */
  source: 'api' | 'unsubscribe'
  updatedAt: string
}

/** A `preferences` row as D1 returns it. */
type PreferenceRow = {
  kind: string
  channel: string
  enabled: number
  mode: DeliveryMode | null
  source: 'api' | 'unsubscribe'
  updated_at: string
}

/**
 * Stores a recipient's choice for (kind, channel), replacing the one before.
 * `mode` undefined keeps the stored mode, so a write that only turns a kind
 * off or on does not forget how the recipient wanted it; null goes back to
 * the kind's default. Parameters: user id, kind, channel, enabled (1/0),
 * source, now, 1 to write the mode, the mode.
 */
export function upsertPreference(
  db: D1Database,
  userId: string,
  choice: { kind: string; channel: string; enabled: boolean; mode?: DeliveryMode | null },
  source: Preference['source'],
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO preferences (user_id, kind, channel, enabled, source, updated_at, mode)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8)
       ON CONFLICT (user_id, kind, channel) DO UPDATE SET
         enabled = excluded.enabled, source = excluded.source, updated_at = excluded.updated_at,
         mode = CASE WHEN ?7 = 1 THEN excluded.mode ELSE preferences.mode END`,
    )
    .bind(
      userId,
      choice.kind,
      choice.channel,
      choice.enabled ? 1 : 0,
      source,
      now,
      choice.mode === undefined ? 0 : 1,
      choice.mode ?? null,
    )
}

/**
 * The opt-out of a one-click unsubscribe, and of "off" on the link's page.
 * Idempotent: an opt-out already in place is left as it is (its time too), so
 * a link clicked twice, or fetched by a mail provider and then clicked,
 * changes nothing the second time. The stored mode stays, for when the
 * recipient turns the kind back on.
 * Parameters: user id, kind, channel, now.
 */
export function optOut(db: D1Database, scope: UnsubscribeScope, now: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO preferences (user_id, kind, channel, enabled, source, updated_at)
       VALUES (?1, ?2, ?3, 0, 'unsubscribe', ?4)
       ON CONFLICT (user_id, kind, channel) DO UPDATE SET enabled = 0, source = 'unsubscribe', updated_at = ?4
       WHERE preferences.enabled = 1`,
    )
    .bind(scope.userId, scope.kind, scope.channel, now)
}

/** Every stored choice of a user. */
export async function preferencesOf(db: D1Database, userId: string): Promise<Preference[]> {
  const { results } = await db
    .prepare(
      'SELECT kind, channel, enabled, mode, source, updated_at FROM preferences WHERE user_id = ?1 ORDER BY kind, channel',
    )
    .bind(userId)
    .all<PreferenceRow>()
  return results.map((row) => ({
    kind: row.kind,
    channel: row.channel,
    enabled: row.enabled === 1,
    mode: row.mode,
    source: row.source,
    updatedAt: row.updated_at,
  }))
}

/** The key of an opt-out in `BatchContext.optedOut`. */
export function optOutKey(userId: string, kind: string, channel: string): string {
  return `${userId}\n${kind}\n${channel}`
}
