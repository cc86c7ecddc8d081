import { BY_EMAIL } from '../notifications/channels.ts'
import { firstTransport, firstUsable, isProbe, pinned, probeOf, triedThrough } from '../notifications/route.ts'
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

/** A configured transport as the claim reads it: its pause, if any, and its failures since its last accepted send. */
export type TransportState = { transport: string; pause: TransportPause | undefined; outages: number }

/**
 * Every configured transport's pause (or open circuit) and its count of
 * consecutive failures that say the provider may be down, one row each in
 * their order. Parameters: JSON array of the configured transports.
 */
export function readTransports(db: D1Database, transports: string): D1PreparedStatement {
  return db
    .prepare(
      `SELECT t.value AS transport, p.code, p.reason, p.since, p.failures, p.probe_at, p.probe_id,
         coalesce(f.failures, 0) AS outages
       FROM json_each(?1) t LEFT JOIN transport_pauses p ON p.transport = t.value
         LEFT JOIN transport_failures f ON f.transport = t.value
       ORDER BY t.key`,
    )
    .bind(transports)
}

/** The states `readTransports` read, by transport. */
export function transportStatesOf(rows: readonly Record<string, unknown>[]): Map<string, TransportState> {
  return new Map(
    rows.map((row) => {
      const transport = String(row.transport)
      const pause = row.code === null || row.code === undefined ? undefined : (row as TransportPause)
      return [transport, { transport, pause, outages: Number(row.outages ?? 0) }]
    }),
  )
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
 * before. With `outagesAtLeast`, only once the transport's count of
 * failures (`transport_failures`) reached it, or for a refused probe: the
 * circuit of src/dispatch/circuit.ts. Parameters: transport, code, reason,
 * now, the earliest next probe (or null), the refused notification.
 */
export function pauseTransport(
  db: D1Database,
  transport: string,
  code: string,
  reason: string,
  now: Date,
  notBefore: Date | null,
  notificationId: string,
  outagesAtLeast = 0,
): D1PreparedStatement {
  const nowIso = now.toISOString()
  // The backoff of the failure count after this one, computed in SQL from the stored count.
  const steps = [1, 2, 3, 4, 5, 6].map((n) => `WHEN ${n} THEN ${probeDelaySeconds(n)}`).join(' ')
  const after = (seconds: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ?4, '+' || (${seconds}) || ' seconds')`
  return db
    .prepare(
      `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
       SELECT ?1, ?2, ?3, ?4, 1, max(?5, ${after(String(probeDelaySeconds(1)))}), NULL, ?4
       WHERE ?7 = 0 OR (SELECT failures FROM transport_failures WHERE transport = ?1) >= ?7
         OR EXISTS (SELECT 1 FROM transport_pauses WHERE transport = ?1 AND probe_id = ?6)
       ON CONFLICT (transport) DO UPDATE SET code = excluded.code, reason = excluded.reason,
         updated_at = excluded.updated_at,
         failures = transport_pauses.failures + (transport_pauses.probe_id IS ?6),
         probe_at = max(?5, CASE WHEN transport_pauses.probe_id IS ?6
           THEN ${after(`CASE transport_pauses.failures + 1 ${steps} ELSE ${probeDelaySeconds(99)} END`)}
           ELSE transport_pauses.probe_at END),
         probe_id = CASE WHEN transport_pauses.probe_id IS ?6 THEN NULL ELSE transport_pauses.probe_id END`,
    )
    .bind(transport, code, reason, nowIso, notBefore?.toISOString() ?? '', notificationId, outagesAtLeast)
}

/**
 * Takes the probe slot of a pause whose probe is due: names the oldest paused
 * notification as the probe and holds the slot for `holdSeconds` (a probe
 * whose send never reports back is replaced after that). Not one that may
 * have gone out through another transport: it goes through that one or not
 * at all. Parameters: transport, now, hold until, JSON array of the configured transports.
 */
export function takeProbe(
  db: D1Database,
  transport: string,
  now: string,
  holdUntil: string,
  transports: string,
): D1PreparedStatement {
  const candidate = `FROM notifications WHERE status = 'paused' AND (NOT ${pinned('?4')} OR ${triedThrough('?4')} = ?1)`
  return db
    .prepare(
      `UPDATE transport_pauses SET probe_at = ?3, updated_at = ?2,
         probe_id = (SELECT id ${candidate} ORDER BY created_at, id LIMIT 1)
       WHERE transport = ?1 AND probe_at <= ?2 AND EXISTS (SELECT 1 ${candidate})
       RETURNING probe_id`,
    )
    .bind(transport, now, holdUntil, transports)
}

/**
 * Ends a pause that holds nothing, once its probe is due: no notification
 * waits `paused`, and no probe is out (pending or being sent) — they all went
 * another way (an erasure, an unknown outcome, an operator). The next send
 * tells whether the provider takes mail again; refused, it pauses the
 * transport anew. Without this, such a pause would last until something new
 * waited for it. Not while another configured transport is usable: mail goes
 * through that one, and the paused one comes back by a probe the claim picks
 * (src/dispatch/failover.ts), not by all of the traffic at once.
 * Parameters: transport, now, JSON array of the configured transports.
 */
export function endIdlePause(db: D1Database, transport: string, now: string, transports: string): D1PreparedStatement {
  return db
    .prepare(
      `DELETE FROM transport_pauses WHERE transport = ?1 AND probe_at <= ?2
         AND NOT EXISTS (SELECT 1 FROM notifications WHERE status = 'paused')
         AND NOT EXISTS (SELECT 1 FROM notifications WHERE id = transport_pauses.probe_id
                         AND status IN ('pending', 'sending'))
         AND NOT EXISTS (SELECT 1 FROM json_each(?3) t WHERE t.value <> ?1
                         AND NOT EXISTS (SELECT 1 FROM transport_pauses q WHERE q.transport = t.value))
       RETURNING transport`,
    )
    .bind(transport, now, transports)
}

/**
 * Ends a transport's pause or open circuit, and its count of failures: a send
 * through it was accepted. Parameters: transport.
 */
export function resumeTransport(db: D1Database, transport: string): D1PreparedStatement[] {
  return [
    db.prepare('DELETE FROM transport_pauses WHERE transport = ?1').bind(transport),
    db.prepare('DELETE FROM transport_failures WHERE transport = ?1').bind(transport),
  ]
}

/**
 * What an accepted send through a transport ends: its pause or open circuit
 * as the claim read it (`resumeTransport`), releasing every notification the
 * pause held, or else the count of its failures in a row, when there was one.
 * Parameters: transport, its pause as read, its failures as read, now.
 */
export function acceptedThrough(
  db: D1Database,
  transport: string,
  pause: TransportPause | undefined,
  outages: number,
  now: string,
): D1PreparedStatement[] {
  if (pause) return [...resumeTransport(db, transport), releasePaused(db, now)]
  if (outages > 0) return [db.prepare('DELETE FROM transport_failures WHERE transport = ?1').bind(transport)]
  return []
}

/**
 * Ends the claim of a claimable email as `paused` when the transport it would
 * go through cannot take it and it is no probe: the transport it may have
 * gone out through when it is pinned to one (`pinned`), which the failover
 * gate (src/dispatch/failover.ts) left here because no other is usable;
 * else every configured transport, all paused. One left `sending` by a
 * claim whose lease ran out may have gone out: it is marked so
 * (`TAKEN_OVER`), as a claim taking it over would. Runs in the claim's
 * batch right before the claim, so nothing is sent through a paused
 * transport but its probe. An in-app item goes on: the pause is email's.
 * Parameters: the claim batch's JSON (`IN_CLAIM_BATCH`), now, JSON array of
 * the configured transports.
 */
export function pauseGate(db: D1Database, claims: string, now: string, transports: string): D1PreparedStatement {
  const held = `CASE WHEN ${pinned('?3')} THEN ${triedThrough('?3')} ELSE ${firstTransport('?3')} END`
  return db
    .prepare(
      `UPDATE notifications SET status = 'paused', lease_until = NULL, updated_at = ?2, ${TAKEN_OVER},
         error_code = 'NTF_TRANSPORT_PAUSED',
         status_reason = (SELECT 'waiting: the ' || p.transport || ' transport is paused (' || p.code || ')'
                          FROM transport_pauses p WHERE p.transport = ${held})
       WHERE ${IN_CLAIM_BATCH} AND ${claimable('?2', '?2', STATUS_AS_FILTER)} AND ${BY_EMAIL}
         AND NOT ${isProbe('?3')}
         AND CASE WHEN ${pinned('?3')}
               THEN EXISTS (SELECT 1 FROM transport_pauses p WHERE p.transport = ${triedThrough('?3')})
               ELSE ${firstUsable('?3')} IS NULL END
       RETURNING id, kind, channel`,
    )
    .bind(claims, now, transports)
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
                                           AND ${probeOf('p', 'notifications')})
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
 * Releases paused notifications that a usable transport can take: one
 * configured transport has no pause — the transport they waited for was
 * switched (EMAIL_TRANSPORT changed), its pause was ended by hand, or
 * another of EMAIL_TRANSPORTS came back. Without it they would wait for a
 * probe that never comes. One that may have gone out through a paused
 * transport goes on to the failover gate, which holds it for that
 * transport's delivery events. Parameters: JSON array of the configured transports, now.
 */
export function releaseOrphanedPaused(db: D1Database, transports: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', scheduled_at = ?2, enqueued_at = NULL, updated_at = ?2,
         error_code = NULL, status_reason = 'released: no pause holds it'
       WHERE status = 'paused' AND ${firstUsable('?1')} IS NOT NULL`,
    )
    .bind(transports, now)
}
