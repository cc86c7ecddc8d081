import type { AwaitingRow } from './contact-wait.ts'

/**
 * Emails that wait for their in-app item (`escalating`): the item goes to the
 * recipient's feed at once, the email waits its kind's escalation
 * (`scheduled_at`), and is then sent only if the item was not seen (or read,
 * `escalation_unless`) by then. The feed of the recipient decides, once
 * (src/inbox/feed.ts); what the decision makes of the email is written here,
 * each statement only while the email still waits, so that two deliveries of
 * its message write one outcome.
 */

/** What deciding an escalation needs of its waiting email: what planning it again needs, and its in-app notification. */
export type EscalatingRow = AwaitingRow & {
  escalation_of: string
  escalation_unless: 'seen' | 'read'
  /** The address and name its event carried (ArtHunt's), if any: planned again, it is sent there. */
  recipient_email: string | null
  recipient_name: string | null
}

/** Of these notifications (a JSON array of ids), those still waiting for their item whose wait has ended. Parameters: ids, now. */
export function selectDueEscalations(db: D1Database, ids: readonly string[], now: string): D1PreparedStatement {
  return db
    .prepare(
      `SELECT id, event_id, idempotency_key, source, scheduled_at, trace_id, decision_person, decision_request, decision_at,
         kind, channel, urgency, recipient_user_id, recipient_email, recipient_name, is_fallback, model, escalation_of,
         escalation_unless, escalated_at, cancellation_key
       FROM notifications
       WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'escalating' AND scheduled_at <= ?2`,
    )
    .bind(JSON.stringify(ids), now)
}

/**
 * Ends a waiting email unsent: its item was seen (or read) at `markedAt`,
 * before the feed decided at `decidedAt`. Only while it waits.
 */
export function spareEscalation(
  db: D1Database,
  id: string,
  how: { unless: 'seen' | 'read'; markedAt: string; decidedAt: string },
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'seen-in-app', status_reason = ?2, escalated_at = ?3, model = NULL,
         scheduled_at = ?4, updated_at = ?4
       WHERE id = ?1 AND status = 'escalating'`,
    )
    .bind(id, `its in-app item was ${how.unless} at ${how.markedAt}: no email`, how.decidedAt, now)
}

/**
 * Takes a waiting email out, for it to be written again as planning writes
 * it now that it goes (its digest, its throttle, its contact). Only while it
 * waits: the write that follows applies only if this one did.
 */
export function takeEscalation(db: D1Database, id: string): D1PreparedStatement {
  return db.prepare("DELETE FROM notifications WHERE id = ?1 AND status = 'escalating'").bind(id)
}
