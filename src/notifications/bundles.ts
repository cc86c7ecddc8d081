import { deleteOldest } from '../sql.ts'
import { CLAIMED_COLUMNS } from './claim.ts'
import { claimable, heldBy, TAKEN_OVER, TRY_NOT_COUNTED } from './sql.ts'

/**
 * Bundles of notifications sent in one provider request under one
 * idempotency key (`send_batches`). Membership is written once, before the
 * first request, under the claim that made the bundle; from then on a member
 * is only ever sent with its whole bundle, in the same order, so a retry is
 * the same request and the provider answers it instead of sending again. A
 * bundle the provider refused as a whole — nothing was sent under its key —
 * lets its members go (`leaveBundle`), and they are sent again like any other.
 */

/** A new bundle. Parameters: id (its idempotency key), transport, size, now. */
export function createBundle(db: D1Database, id: string, transport: string, size: number, now: string) {
  return db
    .prepare('INSERT INTO send_batches (id, transport, size, created_at) VALUES (?1, ?2, ?3, ?4)')
    .bind(id, transport, size, now)
}

/**
 * Retention of bundles: deletes the oldest created before `before`, at most
 * `limit`, found by `send_batches_created`. Nothing reads a bundle's row once
 * its request went (its members carry its id and their place in it); the
 * row records the key. Parameters: before, limit.
 */
export function pruneBundles(db: D1Database, before: string, limit: number): D1PreparedStatement {
  return deleteOldest(db, 'send_batches', 'id', 'created_at', before, limit)
}

/**
 * Puts a notification this claim holds into a bundle at `position`, unless it is
 * in one already or must be sent alone. Parameters: id, bundle id, position, claim token.
 */
export function joinBundle(db: D1Database, id: string, batchId: string, position: number, token: string) {
  return db
    .prepare(
      `UPDATE notifications SET batch_id = ?2, batch_position = ?3
       WHERE id = ?1 AND ${heldBy('?4')} AND batch_id IS NULL AND send_alone = 0`,
    )
    .bind(id, batchId, position, token)
}

/**
 * Claims every member of a bundle a delivery may take (`claimable`, as a single
 * claim would), under this claim's token and lease, and counts the attempt.
 * Members this claim already holds are left as they are. Without the claim's
 * gates and decision holds (src/notifications/claim.ts): the members were
 * judged when the bundle was made, and a bundle is sent whole or not at all. A
 * verification decision never reaches here: it joins no bundle
 * (src/dispatch/stages/bundle.ts), its claim's holds decide it alone. They
 * go through the transport of the member whose claim took the bundle.
 * Parameters: bundle id, now, lease until, claim token, transport.
 */
export function claimBundle(
  db: D1Database,
  batchId: string,
  now: string,
  leaseUntil: string,
  token: string,
  transport: string,
) {
  return db
    .prepare(
      `UPDATE notifications SET status = 'sending', lease_until = ?3, claim_token = ?4,
         send_attempts = send_attempts + 1, updated_at = ?2, claimed_at = ?2, ${TAKEN_OVER}, transport = ?5,
         failover_from = NULL
       WHERE batch_id = ?1 AND ${claimable('?2', '?2')}`,
    )
    .bind(batchId, now, leaseUntil, token, transport)
}

/** Every member of a bundle in its order, with the claim token that holds it. Parameters: bundle id. */
export function bundleMembers(db: D1Database, batchId: string) {
  return db
    .prepare(`SELECT ${CLAIMED_COLUMNS}, claim_token FROM notifications WHERE batch_id = ?1 ORDER BY batch_position`)
    .bind(batchId)
}

/**
 * A member this claim took but cannot send, because another delivery holds a
 * part of its bundle: back to `pending` at the time it had, its attempt not
 * counted, so its own dispatch message still finds it.
 * Parameters: id, now, claim token.
 */
export function giveBackMember(db: D1Database, id: string, now: string, token: string) {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', lease_until = NULL, updated_at = ?2, ${TRY_NOT_COUNTED}
       WHERE id = ?1 AND ${heldBy('?3')}`,
    )
    .bind(id, now, token)
}

/**
 * The members this claim holds leave their bundle: the provider refused the
 * bundle's request itself, so nothing was sent under its key. With `alone`,
 * they are sent alone from now on (the bundle was refused as invalid: one of
 * them is, and it must fail by itself). Parameters: bundle id, claim token, alone (0 or 1).
 */
export function leaveBundle(db: D1Database, batchId: string, token: string, alone: boolean) {
  return db
    .prepare(
      `UPDATE notifications SET batch_id = NULL, batch_position = NULL, send_alone = max(send_alone, ?3)
       WHERE batch_id = ?1 AND ${heldBy('?2')}`,
    )
    .bind(batchId, token, alone ? 1 : 0)
}

/**
 * A member this claim holds leaves its bundle to be sent alone: the transport
 * its claim chose sends no bundles (the bundle's own is paused or its circuit
 * open), and nothing of the bundle may have gone out — else the claim would
 * have kept it with the bundle's transport (src/notifications/route.ts).
 * Parameters: id, claim token.
 */
export function leaveBundleAlone(db: D1Database, id: string, token: string) {
  return db
    .prepare(`UPDATE notifications SET batch_id = NULL, batch_position = NULL WHERE id = ?1 AND ${heldBy('?2')}`)
    .bind(id, token)
}
