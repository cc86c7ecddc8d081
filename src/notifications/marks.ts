import { triedThrough } from './route.ts'
import { heldBy, TRY_NOT_COUNTED, withUnconfirmed } from './sql.ts'

// An in-app item a cancellation withdrew while it was on its way: the feed refused it, or removed it
// right after (src/cancel/cancel-key.ts withdraws every item of the key, whatever its row's status).
const WITHDRAWN_ITEM = "channel = 'in-app' AND cancelled_at IS NOT NULL"

/**
 * Marks a notification sent through `transport`, only under the claim that
 * sent it — also when a lapsed lease made its outcome `unknown` meanwhile (the
 * claim token stays): the claim that sent it knows it went out. `providerId`
 * is null when the provider said the email went out without naming it (a
 * batch's key already taken), and `reason` then says so. The row carries
 * `mark`, and the caller counts it `sent` in the same transaction
 * (./counted.ts). An in-app item that a cancellation withdrew while it was
 * on its way ends `cancelled` instead (its feed refused it, or removed it),
 * counted by the status trigger. Parameters: id, provider id, now, claim
 * token, reason, transport, count mark.
 */
export function markSent(
  db: D1Database,
  id: string,
  transport: string,
  providerId: string | null,
  now: string,
  token: string,
  mark: number,
  reason: string | null = null,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = CASE WHEN ${WITHDRAWN_ITEM} THEN 'cancelled' ELSE 'sent' END,
         provider_id = coalesce(?2, provider_id), sent_at = ?3, updated_at = ?3, lease_until = NULL, error_code = NULL,
         status_reason = CASE WHEN ${WITHDRAWN_ITEM}
           THEN 'withdrawn by a cancellation while it was on its way to the feed' ELSE ?5 END,
         transport = ?6,
         -- A withdrawn item keeps its mark, so that the status trigger counts it cancelled, not the caller sent.
         count_mark = CASE WHEN ${WITHDRAWN_ITEM} THEN count_mark ELSE ?7 END
       WHERE id = ?1 AND status IN ('sending', 'unknown') AND claim_token = ?4`,
    )
    .bind(id, providerId, now, token, reason, transport, mark)
}

/**
 * Keeps the exact message handed to the transport, when the mark before it in
 * the same batch succeeded under `token` — only where the deployment keeps sent
 * messages at all (`keptDays` > 0, SENT_MESSAGE_RETENTION_DAYS): by default it
 * keeps none, and this is no statement. Parameters: id, transport,
 * Message-ID, raw MIME, now, claim token.
 */
export function recordSentMessage(
  db: D1Database,
  keptDays: number,
  id: string,
  transport: string,
  messageId: string,
  raw: string,
  now: string,
  token: string,
): D1PreparedStatement[] {
  if (keptDays === 0) return []
  const statement = db
    .prepare(
      `INSERT INTO sent_messages (notification_id, transport, message_id, raw, sent_at)
       SELECT ?1, ?2, ?3, ?4, ?5
       WHERE EXISTS (SELECT 1 FROM notifications WHERE id = ?1 AND status = 'sent' AND claim_token = ?6)
       ON CONFLICT (notification_id) DO UPDATE SET transport = excluded.transport, message_id = excluded.message_id,
         raw = excluded.raw, sent_at = excluded.sent_at`,
    )
    .bind(id, transport, messageId, raw, now, token)
  return [statement]
}

/**
 * Ends a claimed notification after a failed send, only under the claim that
 * tried: `failed` (a refusal about this message, or its last attempt), or
 * `suppressed` when the transport refused the address as suppressed.
 * Parameters: id, status, code, reason, now, claim token.
 */
export function markSendFailure(
  db: D1Database,
  id: string,
  status: 'failed' | 'suppressed',
  code: string,
  reason: string,
  now: string,
  token: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = ?2, error_code = ?3, status_reason = ?4, updated_at = ?5, lease_until = NULL
       WHERE id = ?1 AND ${heldBy('?6')}`,
    )
    .bind(id, status, code, reason, now, token)
}

/**
 * Puts a claimed notification back to `pending` after a transient failure,
 * due at its retry time, only under the claim that tried. The retry time is
 * the row's own: the cron re-enqueues it only once that time (and the grace)
 * has passed without a claim, and a message for an older time is stale. A
 * failure that may have come after the provider took it (`uncertain`: no
 * answer, a 5xx) marks that it may have gone out since this claim began
 * (`maybe_sent_at`), unless an earlier try did already.
 * Parameters: id, code, reason, retry at, now, claim token, uncertain.
 */
export function markRetry(
  db: D1Database,
  id: string,
  code: string,
  reason: string,
  retryAt: string,
  now: string,
  token: string,
  uncertain: boolean,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', error_code = ?2, status_reason = ?3, scheduled_at = ?4,
         enqueued_at = ?5, updated_at = ?5, lease_until = NULL,
         maybe_sent_at = CASE WHEN ?7 = 1 THEN coalesce(maybe_sent_at, claimed_at) ELSE maybe_sent_at END
       WHERE id = ?1 AND ${heldBy('?6')}`,
    )
    .bind(id, code, reason, retryAt, now, token, uncertain ? 1 : 0)
}

/**
 * Gives a claimed notification back unsent, `pending` at the time the send
 * pace names (src/dispatch/pace/), only under the claim that holds it: the
 * provider's rate had no slot for it soon enough. Nothing reached the
 * provider, so the try is not counted (`TRY_NOT_COUNTED`): a notification
 * that waits for the pace never uses up its retries. Its last error code is
 * kept. Parameters: id, due at, now, claim token.
 */
export function markPaced(db: D1Database, id: string, dueAt: string, now: string, token: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', scheduled_at = ?2, enqueued_at = ?3, updated_at = ?3,
         lease_until = NULL, status_reason = 'waiting for a send slot: the provider''s rate is spent until then',
         ${TRY_NOT_COUNTED}
       WHERE id = ?1 AND ${heldBy('?4')}`,
    )
    .bind(id, dueAt, now, token)
}

/**
 * A send whose outcome is not known — the transport has no idempotency key,
 * and its answer was lost, or the claim that sent it never recorded a result —
 * waits as `unknown` instead of being sent again blindly: the provider's
 * delivery events for its Message-ID (kept as `provider_id`) settle it as
 * sent, and only when none came by `decideAt` is it sent again (the cron).
 * Parameters: id, Message-ID, reason, decide at, now, claim token.
 */
export function markUnknown(
  db: D1Database,
  id: string,
  messageId: string | null,
  reason: string,
  decideAt: string,
  now: string,
  token: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'unknown', provider_id = coalesce(?2, provider_id),
         error_code = 'NTF_SEND_UNKNOWN', status_reason = ?3, scheduled_at = ?4, updated_at = ?5, lease_until = NULL,
         maybe_sent_at = coalesce(maybe_sent_at, claimed_at)
       WHERE id = ?1 AND ${heldBy('?6')}`,
    )
    .bind(id, messageId, reason, decideAt, now, token)
}

/**
 * The cron's resolution of unknown outcomes: first, those a stored delivery
 * event of their own transport is about — by the Message-ID the event names
 * (one that arrived before the notification was marked unknown: a crash
 * right after the send), or linked to it when it was recorded (src/delivery/),
 * or to a member of its batch (one request carried them all) — are `sent`;
 * then, for those whose time passed with no such event: one that waited to
 * leave a transport that could not be used (`failover_from`,
 * src/dispatch/failover.ts) is taken as not sent by it and goes back to
 * `pending` free of it (no longer in a bundle, nothing of it taken as gone
 * out), for the claim to send through the first usable transport; one tried
 * through a transport without an idempotency key goes back to `pending` to
 * be sent again through it (the same Message-ID) — in both cases due now and
 * not enqueued, so the cron sends them, and one a cancellation marked
 * meanwhile ends `cancelled` instead. Through a transport with a key they
 * are not sent blindly: `selectUndecided` finds them for a dead letter.
 * Nothing is run when no notification is `unknown`, as in most runs: the
 * first statement scans the delivery events, which no index finds by
 * message id, so each minute it read every event of the retention period to
 * change nothing. Returns whether any was `unknown`.
 * Parameters: now, JSON array of the configured transports, JSON array of
 * the transports with an idempotency key.
 */
export async function resolveUnknownOutcomes(
  db: D1Database,
  now: string,
  transports: string,
  keyed: string,
): Promise<boolean> {
  const anyUnknown = await db.prepare("SELECT 1 AS found FROM notifications WHERE status = 'unknown' LIMIT 1").first()
  if (anyUnknown === null) return false
  const messageIdOfRow = `(d.provider_message_id = notifications.provider_id
       OR '<' || d.provider_message_id || '>' = notifications.provider_id)
       AND d.provider = ${triedThrough('?3')}`
  // Taken as not sent: left waiting, or tried through a transport whose retry would be a new email anyway.
  const sentAgain = `status = 'unknown' AND scheduled_at <= ?1
    AND (failover_from IS NOT NULL OR ${triedThrough('?3')} NOT IN (SELECT value FROM json_each(?2)))`
  await db.batch([
    db
      .prepare(
        `UPDATE delivery_events AS d SET notification_id = (SELECT id FROM notifications
           WHERE status = 'unknown' AND ${messageIdOfRow})
         WHERE d.notification_id IS NULL
           AND EXISTS (SELECT 1 FROM notifications WHERE status = 'unknown' AND ${messageIdOfRow})`,
      )
      .bind(now, keyed, transports),
    db
      .prepare(
        `UPDATE notifications SET status = 'sent', sent_at = ?1, updated_at = ?1, error_code = NULL,
           status_reason = 'a delivery event had named its message: the send had gone out'
         WHERE status = 'unknown'
           AND (EXISTS (SELECT 1 FROM delivery_events d
                        WHERE (d.notification_id = notifications.id AND d.provider = ${triedThrough('?3')})
                          OR (${messageIdOfRow}))
                OR (batch_id IS NOT NULL AND EXISTS (
                  SELECT 1 FROM notifications m JOIN delivery_events d ON d.notification_id = m.id
                  WHERE m.batch_id = notifications.batch_id AND m.status IN ('unknown', 'sent')
                    AND d.provider = ${triedThrough('?3')})))`,
      )
      .bind(now, keyed, transports),
    // One a cancellation marked while it was in flight is not sent again: taken as not sent, as the
    // resend would take it, it ends cancelled (src/notifications/cancel.ts). It keeps the transport of the
    // try so taken, which a cancellation's answer names: that try may have gone out all the same.
    db
      .prepare(
        `UPDATE notifications SET status = 'cancelled', lease_until = NULL, updated_at = ?1,
           status_reason = 'cancelled while its outcome was unknown: no delivery event came, so it is taken as not sent, and not sent again',
           unconfirmed_through = ${withUnconfirmed(`coalesce(failover_from, ${triedThrough('?3')})`)}
         WHERE ${sentAgain} AND cancelled_at IS NOT NULL`,
      )
      .bind(now, keyed, transports),
    db
      .prepare(
        `UPDATE notifications SET status = 'pending', enqueued_at = NULL, updated_at = ?1,
           status_reason = CASE WHEN failover_from IS NOT NULL
             THEN 'no delivery event came from ' || failover_from || ': sent through the next transport'
             ELSE 'no delivery event arrived for the unknown outcome: sent again' END,
           maybe_sent_at = CASE WHEN failover_from IS NOT NULL THEN NULL ELSE maybe_sent_at END,
           unconfirmed_through = ${withUnconfirmed('failover_from')},
           provider_id = CASE WHEN failover_from IS NOT NULL THEN NULL ELSE provider_id END,
           batch_position = CASE WHEN failover_from IS NOT NULL THEN NULL ELSE batch_position END,
           batch_id = CASE WHEN failover_from IS NOT NULL THEN NULL ELSE batch_id END
         WHERE ${sentAgain}`,
      )
      .bind(now, keyed, transports),
  ])
  return true
}

/** An unknown outcome whose wait for delivery events is over. */
export type UndecidedRow = {
  id: string
  kind: string
  event_id: string
  source: string
  scheduled_at: string
  send_attempts: number
  status_reason: string | null
}

/**
 * Unknown outcomes whose wait for a delivery event is over, through a
 * transport that must not send them again blindly, oldest first.
 * Parameters: now, limit.
 */
export function selectUndecided(db: D1Database, now: string, limit: number): D1PreparedStatement {
  return db
    .prepare(
      `SELECT id, kind, event_id, source, scheduled_at, send_attempts, status_reason FROM notifications
       WHERE status = 'unknown' AND scheduled_at <= ?1 AND failover_from IS NULL ORDER BY scheduled_at LIMIT ?2`,
    )
    .bind(now, limit)
}

/**
 * Ends an unknown outcome no delivery event settled, through a transport
 * whose key the provider no longer keeps: `failed` (NTF_SEND_UNKNOWN) with
 * its reason, for an operator to decide (its dead letter goes in the same
 * batch). Only while it still waits. Parameters: id, reason, now.
 */
export function markUndecided(db: D1Database, id: string, reason: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'failed', error_code = 'NTF_SEND_UNKNOWN', status_reason = ?2, updated_at = ?3
       WHERE id = ?1 AND status = 'unknown'`,
    )
    .bind(id, reason, now)
}
