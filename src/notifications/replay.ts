import { mayHaveGoneOut, withUnconfirmed } from './sql.ts'
/**
 * Puts a notification an operator replays back in the pipeline: a `failed`
 * one to `pending`, due now; one that never had content — it waited for its
 * contact and that wait ended (`undeliverable`, NTF_CONTACT_NOT_FOUND), or its
 * template could not be rendered then — back to `awaiting-contact` for
 * another wait, which the contact (or the cron, when it exists by now)
 * releases; a digest whose close could not render it back to `closing`, so
 * the next delivery renders it again from its members (the template fixed). Its attempts start again, so a replay gets the whole retry
 * policy (and a lost answer its wait for delivery events) like a new one.
 * Nothing is put back whose content retention or an erasure
 * removed: there is nothing left to send. A replayed notification leaves the
 * batch it failed with (./batch.ts) and is sent alone from then on, under its
 * own id as the key — the key of its earlier lone tries, so Resend still
 * answers one of those it took instead of sending again: an operator's replay
 * is a decision to send again, and a batch cannot be sent whole once a member
 * went its own way. For the same reason it no longer counts as a send that
 * may have gone out (`maybe_sent_at`): one whose outcome was left unknown past
 * the provider's window (NTF_SEND_UNKNOWN) is sent again when replayed. The
 * transport of that try joins `unconfirmed_through`, so that a cancellation
 * that ends the replayed notification still says the try may have gone.
 * Parameters: id, now, the end of a new wait.
 */
export function resetForReplay(db: D1Database, id: string, now: string, waitUntil: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET
         status = CASE WHEN is_digest = 1 AND text_body IS NULL THEN 'closing'
                       WHEN model IS NOT NULL THEN 'awaiting-contact' ELSE 'pending' END,
         scheduled_at = CASE WHEN model IS NOT NULL AND is_digest = 0 THEN ?3 ELSE ?2 END,
         enqueued_at = ?2, error_code = NULL, status_reason = 'replayed by an operator', lease_until = NULL,
         updated_at = ?2, send_attempts = 0, batch_id = NULL, batch_position = NULL, send_alone = 1,
         unconfirmed_through = CASE WHEN ${mayHaveGoneOut('notifications')}
                                    THEN ${withUnconfirmed('transport')} ELSE unconfirmed_through END,
         maybe_sent_at = NULL
       WHERE id = ?1 AND content_removed_at IS NULL
         AND (status = 'failed'
              OR (status = 'undeliverable' AND error_code = 'NTF_CONTACT_NOT_FOUND' AND model IS NOT NULL))`,
    )
    .bind(id, now, waitUntil)
}
