import { STATUS_AS_FILTER } from '../sql.ts'

/**
 * Notifications that wait for their recipient's contact (`awaiting-contact`):
 * the contact replica may lag behind the events that name a recipient, so a
 * notification without an address waits instead of ending. `scheduled_at` is
 * the end of the wait (CONTACT_WAIT_HOURS); `model` keeps what its template
 * needs. The contact's arrival releases it (src/materialize/release-waiting.ts).
 */

/** What a release needs of a waiting notification. */
export type AwaitingRow = {
  id: string
  event_id: string
  idempotency_key: string
  source: string
  scheduled_at: string
  trace_id: string | null
  decision_person: string | null
  decision_request: string | null
  decision_at: string | null
  kind: string
  channel: string
  urgency: string
  recipient_user_id: string
  is_fallback: number
  model: string | null
  /** An email that escalated (./escalation.ts) before it waited: its in-app notification, condition and decision time. */
  escalation_of: string | null
  escalation_unless: 'seen' | 'read' | null
  escalated_at: string | null
  cancellation_key: string | null
}

/**
 * Waiting notifications whose contact exists now: of these users (a JSON
 * array), or of anyone when `userIds` is null (the cron's sweep), oldest first.
 * Those of the users are looked up by recipient in the partial index of the
 * waiting ones, named: left to itself, SQLite chose the status index, read
 * every waiting notification and filtered them by the list, in every contact
 * batch (`STATUS_AS_FILTER` cannot help here: its `+` hides from SQLite the
 * status term that the partial index needs). The sweep reads every waiting
 * notification, as it must. Parameters: JSON array of user ids, limit; or the
 * limit alone for the sweep.
 */
export function selectReleasable(db: D1Database, userIds: readonly string[] | null, limit: number) {
  const select = (from: string, ofUsers: string, limitParameter: string) =>
    `SELECT id, event_id, idempotency_key, source, scheduled_at, trace_id, decision_person, decision_request, decision_at,
       kind, channel, urgency, recipient_user_id, is_fallback, model, escalation_of, escalation_unless, escalated_at,
         cancellation_key
       FROM ${from}
       WHERE status = 'awaiting-contact'${ofUsers}
         AND EXISTS (SELECT 1 FROM contacts c WHERE c.user_id = notifications.recipient_user_id)
       ORDER BY created_at, id
       LIMIT ${limitParameter}`
  if (userIds === null) return db.prepare(select('notifications', '', '?1')).bind(limit)
  return db
    .prepare(
      select(
        'notifications INDEXED BY notifications_awaiting',
        ' AND recipient_user_id IN (SELECT value FROM json_each(?1))',
        '?2',
      ),
    )
    .bind(JSON.stringify(userIds), limit)
}

/** A waiting notification rendered for its contact, as the release writes it. */
export type Release = {
  id: string
  email: string
  /** The address's keyed pseudonym, which the suppression gate matches after an erasure. */
  recipientHash: string
  name: string | null
  locale: string | null
  timeZone: string
  subject: string | null
  textBody: string | null
  htmlBody: string | null
  templateVersion: number | null
  unsubscribeUrl: string | null
  scheduledAt: string
}

/**
 * Releases a waiting notification: the contact's snapshot and the rendered
 * content, `pending` at its send time. Only while it still waits, so two
 * releases of it (the contact's batch and the cron) write it once.
 * Parameters: the release's fields, now.
 */
export function releaseAwaiting(db: D1Database, release: Release, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', recipient_email = ?2, recipient_name = ?3, locale = ?4,
         time_zone = ?5, subject = ?6, text_body = ?7, html_body = ?8, template_version = ?9, unsubscribe_url = ?10,
         scheduled_at = ?11, enqueued_at = ?12, updated_at = ?12, model = NULL, error_code = NULL,
         recipient_hash = ?13, status_reason = 'released: the contact arrived'
       WHERE id = ?1 AND status = 'awaiting-contact'`,
    )
    .bind(
      release.id,
      release.email,
      release.name,
      release.locale,
      release.timeZone,
      release.subject,
      release.textBody,
      release.htmlBody,
      release.templateVersion,
      release.unsubscribeUrl,
      release.scheduledAt,
      now,
      release.recipientHash,
    )
}

/**
 * Ends a waiting notification — for its contact, or (`waiting`:
 * `escalating`) for its in-app item — whose template cannot be rendered for
 * its contact (none for its locale chain, or one that breaks a limit): `failed`
 * with that code, to be seen and replayed once the template is fixed (its
 * dead letter goes in the same D1 batch).
 * Parameters: id, code, reason, now, the status it waits in.
 */
export function failAwaiting(
  db: D1Database,
  id: string,
  code: string,
  reason: string,
  now: string,
  waiting: 'awaiting-contact' | 'escalating' = 'awaiting-contact',
) {
  return db
    .prepare(
      `UPDATE notifications SET status = 'failed', error_code = ?2, status_reason = ?3, updated_at = ?4
       WHERE id = ?1 AND status = ?5`,
    )
    .bind(id, code, reason, now, waiting)
}

/**
 * Takes a waiting notification out, for its release to write it anew through
 * planning's own write (a kind that gathers into digests or is throttled:
 * src/materialize/release-waiting.ts) — the same id, in the same D1 batch.
 * Only while it still waits, so of two releases one writes it.
 * Parameters: id.
 */
export function takeAwaiting(db: D1Database, id: string): D1PreparedStatement {
  return db.prepare("DELETE FROM notifications WHERE id = ?1 AND status = 'awaiting-contact'").bind(id)
}

/** Waiting notifications whose wait is over (`scheduled_at` passed), oldest first. Parameters: now, limit. */
export function selectExpired(db: D1Database, now: string, limit: number): D1PreparedStatement {
  return db
    .prepare(
      `SELECT id, kind, event_id, source, recipient_user_id, scheduled_at FROM notifications
       WHERE status = 'awaiting-contact' AND scheduled_at <= ?1 ORDER BY scheduled_at LIMIT ?2`,
    )
    .bind(now, limit)
}

/**
 * Ends these waiting notifications as `undeliverable` (NTF_CONTACT_NOT_FOUND),
 * in the D1 batch that writes their dead letters. Their `model` stays, so a replay
 * can wait again. Each id is a primary-key lookup (`STATUS_AS_FILTER`).
 * Parameters: JSON array of ids, now.
 */
export function markExpired(db: D1Database, ids: readonly string[], now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'undeliverable', error_code = 'NTF_CONTACT_NOT_FOUND', updated_at = ?2,
         status_reason = 'no contact for user ' || recipient_user_id || ' in the replica within CONTACT_WAIT_HOURS'
       WHERE id IN (SELECT value FROM json_each(?1)) AND ${STATUS_AS_FILTER} = 'awaiting-contact'`,
    )
    .bind(JSON.stringify(ids), now)
}
