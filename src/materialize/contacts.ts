import type { ContactUpdate } from '../events/define.ts'

/** A contact from the replica. */
export type Contact = ContactUpdate

/** A `contacts` row as D1 returns it. */
export type ContactRow = {
  user_id: string
  email: string
  locale: string | null
  time_zone: string | null
  display_name: string | null
  version: number
}

/** A `contacts` row as the planner and the API use it. */
export function contactFromRow(row: ContactRow): Contact {
  return {
    userId: row.user_id,
    email: row.email,
    locale: row.locale,
    timeZone: row.time_zone,
    displayName: row.display_name,
    version: row.version,
  }
}

/**
 * Upserts a contact of the replica from its producer; an older or equal
 * `version` changes nothing. A newer one also replaces an operator's
 * correction (the producer changed the contact since). With `late`, the
 * pseudonyms of the address and of the user and when the bridge received the
 * event: an upsert that was on its way when its address or user was erased
 * changes nothing (its event came before the erasure, which it must not undo).
 * Parameters: user id, email, locale, time zone, display name, version, now,
 * the address's pseudonym, received at, the user's pseudonym.
 */
export function upsertContact(
  db: D1Database,
  contact: Contact,
  now: string,
  late?: { pseudonym: string; user: string; receivedAt: string },
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO contacts (user_id, email, locale, time_zone, display_name, version, updated_at)
       SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
       WHERE NOT EXISTS (SELECT 1 FROM erased_addresses WHERE pseudonym IN (?8, ?10) AND erased_at >= ?9)
       ON CONFLICT (user_id) DO UPDATE SET
         email = excluded.email, locale = excluded.locale, time_zone = excluded.time_zone,
         display_name = excluded.display_name, version = excluded.version, updated_at = excluded.updated_at,
         operator_edited_at = NULL
       WHERE excluded.version > contacts.version`,
    )
    .bind(
      contact.userId,
      contact.email,
      contact.locale,
      contact.timeZone,
      contact.displayName,
      contact.version,
      now,
      late?.pseudonym ?? null,
      late?.receivedAt ?? null,
      late?.user ?? null,
    )
}

/** The fields an operator corrects, without a version: the version is the producer's alone. */
export type ContactCorrection = Omit<Contact, 'version'>

/**
 * An operator's correction of a contact: it changes the fields and says when,
 * and leaves `version` to the producer, so the producer's next real update
 * (a higher version) is never refused because of it — and replaces it. A
 * contact an operator creates has version -1, below any producer's.
 * Parameters: user id, email, locale, time zone, display name, now.
 */
export function correctContact(db: D1Database, contact: ContactCorrection, now: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO contacts (user_id, email, locale, time_zone, display_name, version, updated_at, operator_edited_at)
       VALUES (?1, ?2, ?3, ?4, ?5, -1, ?6, ?6)
       ON CONFLICT (user_id) DO UPDATE SET
         email = excluded.email, locale = excluded.locale, time_zone = excluded.time_zone,
         display_name = excluded.display_name, updated_at = excluded.updated_at,
         operator_edited_at = excluded.operator_edited_at`,
    )
    .bind(contact.userId, contact.email, contact.locale, contact.timeZone, contact.displayName, now)
}
