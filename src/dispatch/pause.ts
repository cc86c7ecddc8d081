/**
 * A transport paused by a failure of our own configuration (a revoked key, a
 * missing header, an unverified sender or domain, a quota): one row in
 * `transport_pauses` while it lasts. Sends stop but for one probe at a time,
 * tried with a growing interval (or when the provider said, for a quota), and
 * the first accepted send ends the pause. The notifications' side is in
 * src/notifications/pause.ts.
 */

export type { TransportPause } from './pause-row.ts'

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
