import { type DigestMember, openDigest } from './digest.ts'
import type { NotificationRow } from './row.ts'

/**
 * A kind's throttle — at most `max` notifications of it to one recipient on
 * a channel per window — decided inside materialize's D1 batch, where D1's
 * single writer makes "how many went out in this window" and "this one goes
 * out" one step: two batches racing for the last place cannot both take it.
 * A notification to be sent at once (instant) of a throttled kind is four
 * statements instead of one insert:
 *
 * 1. `beginWindow`: the recipient's window, begun anew when the last one ended;
 * 2. `openDigestOverThrottle`: for a kind with a digest, opens the
 *    recipient's digest when the window is full and none is open;
 * 3. `insertThrottled`: the notification — `pending` while the window has
 *    room; past it, folded into the open digest (`digested`), or, for a kind
 *    without a digest, `throttled`: recorded and counted, never sent;
 * 4. `countSend`: takes a place in the window when (3) wrote it `pending`.
 *
 * The dispatch stage reads the rows (3)/(4) and (2) changed: a message for
 * the notification only when (4) counted it, one for the digest only when (2)
 * opened it.
 */

/** A kind's throttle as a planned notification carries it. */
export type Throttle = {
  max: number
  windowMinutes: number
  /** When the current window must have begun to still run: now minus the window. */
  windowFloor: string
  /** The digest it folds into past the throttle, opened with this id and close if none is open. */
  digest?: { id: string; closesAt: string }
  /** Its template model (JSON), kept should it fold into the digest. */
  model: string
}

/** A notification of a throttled kind as planned: pending, with its throttle. */
export type ThrottledRow = NotificationRow & { status: 'pending'; throttle: Throttle }

/** Whether a planned notification is subject to its kind's throttle. */
export function isThrottled(row: NotificationRow): row is ThrottledRow {
  return row.status === 'pending' && row.throttle !== undefined
}

// The window is full: as many went out in it as the throttle allows. `?u`, `?k`, `?c`: recipient, kind, channel.
const windowFull = (user: string, kind: string, channel: string, max: string) =>
  `coalesce((SELECT used FROM throttle_windows WHERE user_id = ${user} AND kind = ${kind} AND channel = ${channel}),
            0) >= ${max}`

/**
 * Begins the recipient's window of the kind unless one is running: a new row,
 * or the ended one reset to now with nothing used. Parameters: user, kind,
 * channel, now, window floor.
 */
export function beginWindow(db: D1Database, row: ThrottledRow, now: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO throttle_windows (user_id, kind, channel, window_start, used) VALUES (?1, ?2, ?3, ?4, 0)
       ON CONFLICT (user_id, kind, channel) DO UPDATE SET window_start = excluded.window_start, used = 0
       WHERE throttle_windows.window_start <= ?5`,
    )
    .bind(row.recipientUserId, row.kind, row.channel, now, row.throttle.windowFloor)
}

/**
 * Opens the recipient's digest of the kind when the window is full, none is
 * open, and the notification does not exist yet (`openDigest`, under one more
 * condition).
 */
export function openDigestOverThrottle(db: D1Database, row: ThrottledRow, now: string): D1PreparedStatement {
  const digest = row.throttle.digest as { id: string; closesAt: string }
  const member: DigestMember = { ...row, status: 'digested', digest }
  return openDigest(db, member, now, windowFull('?6', '?3', '?4', String(row.throttle.max)))
}

/**
 * Inserts the notification as `pending` while its window has room; past it,
 * as a member of the open digest when the kind has one (its model kept, its
 * own rendering dropped), else `throttled` (its rendering kept: what it would
 * have said). Nothing when it exists. Parameters: see the binding.
 */
export function insertThrottled(db: D1Database, row: ThrottledRow, now: string): D1PreparedStatement {
  const folds = row.throttle.digest ? 1 : 0
  const over = windowFull('?8', '?5', '?6', '?23')
  const reason = `over the throttle of ${row.throttle.max} per ${row.throttle.windowMinutes} min`
  return db
    .prepare(
      `INSERT INTO notifications
         (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id,
          recipient_email, recipient_name, locale, time_zone, subject, text_body, html_body, template_version,
          status, status_reason, is_fallback, scheduled_at, trace_id, enqueued_at, created_at, updated_at,
          unsubscribe_url, model, recipient_hash, digest_id)
       SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
          CASE WHEN fold THEN NULL ELSE ?13 END, CASE WHEN fold THEN NULL ELSE ?14 END,
          CASE WHEN fold THEN NULL ELSE ?15 END, CASE WHEN fold THEN NULL ELSE ?16 END,
          CASE WHEN fold THEN 'digested' WHEN over THEN 'throttled' ELSE 'pending' END,
          CASE WHEN fold THEN ?25 || ': told in the next digest' WHEN over THEN ?25 ELSE NULL END,
          0, ?17, ?18, ?19, ?19, ?19, ?20, CASE WHEN fold THEN ?21 ELSE NULL END, ?22,
          CASE WHEN fold THEN (SELECT id FROM notifications
                               WHERE recipient_user_id = ?8 AND kind = ?5 AND channel = ?6 AND status = 'collecting')
          END
       FROM (SELECT ${over} AS over, ${over} AND ?24 = 1 AS fold)
       WHERE NOT EXISTS (SELECT 1 FROM notifications WHERE id = ?1)
       ON CONFLICT DO NOTHING`,
    )
    .bind(
      row.id,
      row.idempotencyKey,
      row.eventId,
      row.source,
      row.kind,
      row.channel,
      row.urgency,
      row.recipientUserId,
      row.recipientEmail,
      row.recipientName,
      row.locale,
      row.timeZone,
      row.subject,
      row.textBody,
      row.htmlBody,
      row.templateVersion,
      row.scheduledAt,
      row.traceId,
      now,
      row.unsubscribeUrl,
      row.throttle.model,
      row.recipientHash,
      row.throttle.max,
      folds,
      reason,
    )
}

/**
 * Takes a place in the window for the notification `insertThrottled` just
 * wrote `pending` (its `created_at` is this write's): a redelivered event,
 * whose row is older, takes none. Parameters: user, kind, channel, id, now.
 */
export function countSend(db: D1Database, row: ThrottledRow, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE throttle_windows SET used = used + 1
       WHERE user_id = ?1 AND kind = ?2 AND channel = ?3
         AND EXISTS (SELECT 1 FROM notifications WHERE id = ?4 AND status = 'pending' AND created_at = ?5)`,
    )
    .bind(row.recipientUserId, row.kind, row.channel, row.id, now)
}
