import { STATUS_AS_FILTER } from '../sql.ts'
import { claimable, heldBy, IN_CLAIM_BATCH, TAKEN_OVER, TRY_NOT_COUNTED } from './sql.ts'

/**
 * The notification's side of a paused transport (src/dispatch/pause.ts keeps
 * the pause itself): while a transport is paused by a failure of our own
 * configuration, its notifications wait as `paused` instead of being tried,
 * one of them at a time is released as the probe, and all of them are
 * released when the provider accepts again.
 */

// The pause's probe, and the members of its batch while the probe itself is still to be sent (a batch is
// sent whole: its probe is all of it). A probe that went its own way meanwhile takes no batch with it. Never
// NULL (a probe without a batch, a member without one): `NOT` of it must be true for every other row.
const PROBE_OF = (p: string, row: string) =>
  `(${p}.probe_id = ${row}.id
    OR coalesce(${row}.batch_id = (SELECT n.batch_id FROM notifications n
        WHERE n.id = ${p}.probe_id AND n.status IN ('paused', 'pending', 'sending')), 0))`

/**
 * Ends the claim of a claimable notification as `paused` when its transport is
 * paused and this notification is not the probe (nor in the probe's batch).
 * One left `sending` by a claim whose lease ran out may have gone out: it is
 * marked so (`TAKEN_OVER`), as a claim taking it over would.
 * Runs in the claim's batch right before the claim, so nothing is sent
 * through a paused transport but the probe. Parameters: the claim batch's
 * JSON (`IN_CLAIM_BATCH`), now, transport.
 */
export function pauseGate(db: D1Database, claims: string, now: string, transport: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'paused', lease_until = NULL, updated_at = ?2, ${TAKEN_OVER},
         error_code = 'NTF_TRANSPORT_PAUSED',
         status_reason = (SELECT 'waiting: the ' || p.transport || ' transport is paused (' || p.code || ')'
                          FROM transport_pauses p WHERE p.transport = ?3)
       WHERE ${IN_CLAIM_BATCH} AND ${claimable('?2', '?2', STATUS_AS_FILTER)}
         AND EXISTS (SELECT 1 FROM transport_pauses p WHERE p.transport = ?3
                     AND (p.probe_id IS NULL OR NOT ${PROBE_OF('p', 'notifications')}))
       RETURNING id, kind, channel`,
    )
    .bind(claims, now, transport)
}

/**
 * A claimed notification whose send was refused for a reason of our own
 * configuration goes back to wait as `paused`, only under the claim that
 * tried; the try does not count against its own retries.
 * Parameters: id, code, reason, now, claim token.
 */
export function markPaused(
  db: D1Database,
  id: string,
  code: string,
  reason: string,
  now: string,
  token: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'paused', error_code = ?2, status_reason = ?3, updated_at = ?4,
         lease_until = NULL, ${TRY_NOT_COUNTED}
       WHERE id = ?1 AND ${heldBy('?5')}`,
    )
    .bind(id, code, reason, now, token)
}

/**
 * Releases the probe: the paused notification the pause names as its
 * `probe_id` becomes `pending`, due now — with the paused members of its
 * batch, when it is in one: a batch member is only ever sent with its batch
 * (src/notifications/batch.ts), so a probe alone could never be sent, and the
 * pause would never end. Parameters: transport, now.
 */
export function releaseProbe(db: D1Database, transport: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', scheduled_at = ?2, enqueued_at = ?2, updated_at = ?2,
         status_reason = 'the probe of a paused transport'
       WHERE status = 'paused' AND EXISTS (SELECT 1 FROM transport_pauses p WHERE p.transport = ?1
                                           AND ${PROBE_OF('p', 'notifications')})
       RETURNING id, scheduled_at`,
    )
    .bind(transport, now)
}

/**
 * Releases every paused notification once the provider accepts again: back
 * to `pending`, due now and not enqueued, so the cron puts them on the queue
 * in bounded chunks. Parameters: now.
 */
export function releasePaused(db: D1Database, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', scheduled_at = ?1, enqueued_at = NULL, updated_at = ?1,
         error_code = NULL, status_reason = 'released: the transport accepts again'
       WHERE status = 'paused'`,
    )
    .bind(now)
}

/**
 * Releases paused notifications that no pause holds any more: the transport
 * they waited for was switched (EMAIL_TRANSPORT changed) or its pause was
 * ended by hand. Without it they would wait for a probe that never comes.
 * Parameters: the configured transport, now.
 */
export function releaseOrphanedPaused(db: D1Database, transport: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', scheduled_at = ?2, enqueued_at = NULL, updated_at = ?2,
         error_code = NULL, status_reason = 'released: no pause holds it'
       WHERE status = 'paused' AND NOT EXISTS (SELECT 1 FROM transport_pauses WHERE transport = ?1)`,
    )
    .bind(transport, now)
}
