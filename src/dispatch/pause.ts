import { BY_EMAIL } from '../notifications/channels.ts'
import { claimable, heldBy, IN_CLAIM_BATCH, TAKEN_OVER, TRY_NOT_COUNTED } from '../notifications/sql.ts'
import { STATUS_AS_FILTER } from '../sql.ts'

/**
 * A transport paused by a failure of our own configuration (a revoked key, a
 * missing header, an unverified sender or domain, a quota), both sides of it:
 * the pause itself, one row in `transport_pauses` while it lasts, and its
 * notifications, which wait as `paused` instead of being tried. Sends stop but
 * for one probe at a time, tried with a growing interval (or when the
 * provider said, for a quota), and the first accepted send ends the pause and
 * releases all of them.
 */

/** What the claim stage, the console and the doctor read of a pause. */
export type TransportPause = {
  transport: string
  code: string
  reason: string
  since: string
  failures: number
  probe_at: string
  probe_id: string | null
}

/** Seconds before the next probe after `failures` refused tries: 30 s doubling to 10 min. */
export function probeDelaySeconds(failures: number): number {
  return Math.min(600, 30 * 2 ** Math.max(0, failures - 1))
}

/** The pause of a transport, if any. Parameters: transport. */
export function readPause(db: D1Database, transport: string): D1PreparedStatement {
  return db
    .prepare(
      'SELECT transport, code, reason, since, failures, probe_at, probe_id FROM transport_pauses WHERE transport = ?1',
    )
    .bind(transport)
}

/**
 * Pauses a transport, or records one more refusal while it is paused. Only a
 * refused probe counts against the backoff (the next probe after 30 s,
 * doubling to 10 min) and frees the probe slot: the sends that were already
 * in flight when the pause began are refused too, and must not push the next
 * probe out. A time the provider named (a quota's reset) is never probed
 * before. Parameters: transport, code, reason, now, the earliest next probe
 * (or null), the refused notification.
 */
export function pauseTransport(
  db: D1Database,
  transport: string,
  code: string,
  reason: string,
  now: Date,
  notBefore: Date | null,
  notificationId: string,
): D1PreparedStatement {
  const nowIso = now.toISOString()
  // The backoff of the failure count after this one, computed in SQL from the stored count.
  const steps = [1, 2, 3, 4, 5, 6].map((n) => `WHEN ${n} THEN ${probeDelaySeconds(n)}`).join(' ')
  const after = (seconds: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ?4, '+' || (${seconds}) || ' seconds')`
  return db
    .prepare(
      `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
       VALUES (?1, ?2, ?3, ?4, 1, max(?5, ${after(String(probeDelaySeconds(1)))}), NULL, ?4)
       ON CONFLICT (transport) DO UPDATE SET code = excluded.code, reason = excluded.reason,
         updated_at = excluded.updated_at,
         failures = transport_pauses.failures + (transport_pauses.probe_id IS ?6),
         probe_at = max(?5, CASE WHEN transport_pauses.probe_id IS ?6
           THEN ${after(`CASE transport_pauses.failures + 1 ${steps} ELSE ${probeDelaySeconds(99)} END`)}
           ELSE transport_pauses.probe_at END),
         probe_id = CASE WHEN transport_pauses.probe_id IS ?6 THEN NULL ELSE transport_pauses.probe_id END`,
    )
    .bind(transport, code, reason, nowIso, notBefore?.toISOString() ?? '', notificationId)
}

/**
 * Takes the probe slot of a pause whose probe is due: names the oldest paused
 * notification as the probe and holds the slot for `holdSeconds` (a probe
 * whose send never reports back is replaced after that).
 * Parameters: transport, now, hold until.
 */
export function takeProbe(db: D1Database, transport: string, now: string, holdUntil: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE transport_pauses SET probe_at = ?3, updated_at = ?2,
         probe_id = (SELECT id FROM notifications WHERE status = 'paused' ORDER BY created_at, id LIMIT 1)
       WHERE transport = ?1 AND probe_at <= ?2
         AND EXISTS (SELECT 1 FROM notifications WHERE status = 'paused')
       RETURNING probe_id`,
    )
    .bind(transport, now, holdUntil)
}

/**
 * Ends a pause that holds nothing, once its probe is due: no notification
 * waits `paused`, and no probe is out (pending or being sent) — they all went
 * another way (an erasure, an unknown outcome, an operator). The next send
 * tells whether the provider takes mail again; refused, it pauses the
 * transport anew. Without this, such a pause would last until something new
 * waited for it. Parameters: transport, now.
 */
export function endIdlePause(db: D1Database, transport: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `DELETE FROM transport_pauses WHERE transport = ?1 AND probe_at <= ?2
         AND NOT EXISTS (SELECT 1 FROM notifications WHERE status = 'paused')
         AND NOT EXISTS (SELECT 1 FROM notifications WHERE id = transport_pauses.probe_id
                         AND status IN ('pending', 'sending'))
       RETURNING transport`,
    )
    .bind(transport, now)
}

/** Ends a transport's pause (a send through it was accepted). Parameters: transport. */
export function resumeTransport(db: D1Database, transport: string): D1PreparedStatement {
  return db.prepare('DELETE FROM transport_pauses WHERE transport = ?1').bind(transport)
}

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
 * through a paused transport but the probe. An in-app item goes on: the
 * pause is the email transport's. Parameters: the claim batch's
 * JSON (`IN_CLAIM_BATCH`), now, transport.
 */
export function pauseGate(db: D1Database, claims: string, now: string, transport: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'paused', lease_until = NULL, updated_at = ?2, ${TAKEN_OVER},
         error_code = 'NTF_TRANSPORT_PAUSED',
         status_reason = (SELECT 'waiting: the ' || p.transport || ' transport is paused (' || p.code || ')'
                          FROM transport_pauses p WHERE p.transport = ?3)
       WHERE ${IN_CLAIM_BATCH} AND ${claimable('?2', '?2', STATUS_AS_FILTER)} AND ${BY_EMAIL}
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
 * (src/notifications/bundles.ts), so a probe alone could never be sent, and the
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
