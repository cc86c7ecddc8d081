import type { Contact } from './context.ts'

/**
 * Upserts a contact of the replica; an older or equal `version` changes
 * nothing. Parameters: user id, email, locale, time zone, display name, version, now.
 */
export function upsertContact(db: D1Database, contact: Contact, now: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO contacts (user_id, email, locale, time_zone, display_name, version, updated_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
       ON CONFLICT (user_id) DO UPDATE SET
         email = excluded.email, locale = excluded.locale, time_zone = excluded.time_zone,
         display_name = excluded.display_name, version = excluded.version, updated_at = excluded.updated_at
       WHERE excluded.version > contacts.version`,
    )
    .bind(contact.userId, contact.email, contact.locale, contact.timeZone, contact.displayName, contact.version, now)
}
