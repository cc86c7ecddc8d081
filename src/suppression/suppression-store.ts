/** Why an address is suppressed. */
export type SuppressionCause = 'hard-bounce' | 'soft-bounce' | 'complaint' | 'provider' | 'operator'

/** One entry of the suppression list. */
export type Suppression = {
  address: string
  cause: SuppressionCause
  reason: string
  /** When it ends (ISO); `null`: until an operator removes it. */
  until: string | null
  /** `cloudflare`, `resend` or `operator`. */
  source: string
  notificationId: string | null
  /** `{provider}:{event id}` of the delivery event that caused it. */
  providerEvent: string | null
  createdAt: string
  updatedAt: string
}

/** A `suppressions` row as D1 returns it. */
export type SuppressionRow = {
  address: string
  cause: SuppressionCause
  reason: string
  until: string | null
  source: string
  notification_id: string | null
  provider_event: string | null
  created_at: string
  updated_at: string
}

/**
 * The form every address is kept and compared in: ASCII letters lower-cased,
 * nothing else touched — exactly what SQLite's `lower()` does, so the dispatch
 * gate (SQL) and the API (JS) agree on every address.
 */
export function normalizeAddress(address: string): string {
  return address.replace(/[A-Z]/g, (letter) => letter.toLowerCase())
}

/** A `suppressions` row as the API shows it. */
export function suppressionFromRow(row: SuppressionRow): Suppression {
  return {
    address: row.address,
    cause: row.cause,
    reason: row.reason,
    until: row.until,
    source: row.source,
    notificationId: row.notification_id,
    providerEvent: row.provider_event,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  }
}

/** What a delivery event or a refused send adds to the list. */
export type SuppressionEntry = Omit<Suppression, 'createdAt' | 'updatedAt'>

/**
 * The user an entry is about: the recipient of the notification that caused
 * it. Kept on the entry because the notification's row ages out
 * (NOTIFICATION_RETENTION_DAYS) while the entry stays, and an erasure by user
 * id must still find an address the person had before (src/erasure/erase.ts);
 * an entry that replaces it without a notification (an operator's) keeps it.
 * @param notificationId - SQL expression of the notification's id
 */
const RECIPIENT_OF = (notificationId: string) =>
  `(SELECT recipient_user_id FROM notifications WHERE id = ${notificationId})`

/**
 * Adds an address from a delivery event or a provider's refusal. An entry
 * already there is replaced only by a stronger one — permanent over dated, a
 * later end over an earlier one — so a soft bounce never shortens what a
 * complaint or an operator decided. With `onlyIfRecorded`, nothing happens
 * unless that delivery event was recorded at `now` (by this same batch): a
 * redelivered event does not bring back an address an operator removed since.
 * With `erasedAs`, the address's pseudonym: when the address was erased
 * (`erased_addresses`), or the notification the report is about was, the
 * entry is kept under the pseudonym with a reason that names nothing — a
 * provider's late bounce never writes an erased address back.
 * Parameters: the entry's fields, now, the event's provider and id, the pseudonym.
 */
export function suppressAutomatically(
  db: D1Database,
  entry: SuppressionEntry,
  now: string,
  onlyIfRecorded?: { provider: string; eventId: string },
  erasedAs?: string,
): D1PreparedStatement {
  const guard = onlyIfRecorded
    ? `EXISTS (SELECT 1 FROM delivery_events WHERE provider = ?9 AND provider_event_id = ?10 AND received_at = ?8)`
    : 'true'
  const erased = erasedAs ? erasedSql('?11', '?6') : 'false'
  return db
    .prepare(
      `INSERT INTO suppressions
         (address, cause, reason, until, source, notification_id, provider_event, created_at, updated_at, user_id)
       SELECT CASE WHEN ${erased} THEN ?11 ELSE ?1 END, ?2,
         CASE WHEN ${erased} THEN 'an erased address (' || ?2 || ')' ELSE ?3 END, ?4, ?5, ?6, ?7, ?8, ?8,
         CASE WHEN ${erased} THEN NULL ELSE ${RECIPIENT_OF('?6')} END
       WHERE ${guard}
       ON CONFLICT (address) DO UPDATE SET cause = excluded.cause, reason = excluded.reason, until = excluded.until,
         source = excluded.source, notification_id = excluded.notification_id,
         provider_event = excluded.provider_event, updated_at = excluded.updated_at,
         user_id = coalesce(excluded.user_id, suppressions.user_id)
       WHERE suppressions.until IS NOT NULL AND (excluded.until IS NULL OR excluded.until > suppressions.until)`,
    )
    .bind(...bindings(entry), now, onlyIfRecorded?.provider ?? null, onlyIfRecorded?.eventId ?? null, erasedAs ?? null)
}

/**
 * Whether an address, by its pseudonym, was erased — or the notification a
 * report is about was: SQL over the pseudonym's and the notification id's
 * parameters. What a provider says about it afterwards keeps no address.
 *
 * @param pseudonym - SQL expression of the address's pseudonym
 * @param notificationId - SQL expression of the notification's id (or NULL)
 */
export function erasedSql(pseudonym: string, notificationId: string): string {
  return `(EXISTS (SELECT 1 FROM erased_addresses WHERE pseudonym = ${pseudonym})
    OR EXISTS (SELECT 1 FROM notifications WHERE id = ${notificationId} AND content_removed_by = 'erasure'))`
}

/** An operator's entry: replaces whatever was there. Parameters: the entry's fields, now. */
export function putSuppression(db: D1Database, entry: SuppressionEntry, now: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO suppressions
         (address, cause, reason, until, source, notification_id, provider_event, created_at, updated_at, user_id)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ${RECIPIENT_OF('?6')})
       ON CONFLICT (address) DO UPDATE SET cause = excluded.cause, reason = excluded.reason, until = excluded.until,
         source = excluded.source, notification_id = excluded.notification_id,
         provider_event = excluded.provider_event, updated_at = excluded.updated_at,
         user_id = coalesce(excluded.user_id, suppressions.user_id)
       RETURNING *`,
    )
    .bind(...bindings(entry), now)
}

function bindings(entry: SuppressionEntry) {
  return [
    normalizeAddress(entry.address),
    entry.cause,
    entry.reason,
    entry.until,
    entry.source,
    entry.notificationId,
    entry.providerEvent,
  ] as const
}

/**
 * The entry of an address, active or expired: under the address itself, or
 * under its pseudonym (src/erasure/pseudonym.ts) when the address was erased —
 * then the entry shows the pseudonym, which is all the list keeps.
 */
export async function suppressionOf(
  db: D1Database,
  address: string,
  pseudonym: string,
): Promise<Suppression | undefined> {
  const row = await db
    .prepare('SELECT * FROM suppressions WHERE address IN (?1, ?2) ORDER BY address = ?1 DESC LIMIT 1')
    .bind(normalizeAddress(address), pseudonym)
    .first<SuppressionRow>()
  return row ? suppressionFromRow(row) : undefined
}

/**
 * Removes an address from the list, in clear and as its pseudonym (its
 * `changes` say whether there was one).
 */
export function deleteSuppression(db: D1Database, address: string, pseudonym: string): D1PreparedStatement {
  return db.prepare('DELETE FROM suppressions WHERE address IN (?1, ?2)').bind(normalizeAddress(address), pseudonym)
}
