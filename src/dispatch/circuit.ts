import { pauseTransport } from './pause.ts'
import type { SendError } from './transports/types.ts'

/**
 * A transport's circuit, for a Worker with more than one transport
 * (EMAIL_TRANSPORTS): failures that say the provider may be down — a 5xx,
 * no answer, an internal error of the binding — are counted per transport
 * (`transport_failures`), and at CIRCUIT_FAILURES in a row the circuit
 * opens: a pause with the code `circuit-open`, so new mail goes through
 * the next transport while one probe at a time, on the pause's schedule,
 * tells when this one answers again. An accepted send clears the count and
 * closes the circuit (`resumeTransport`). The failures themselves are
 * retried as before: one that may have gone out is tried again only
 * through its own transport, or, while that one's circuit is open, after
 * its delivery events had their chance (src/dispatch/failover.ts).
 * With one transport there is nothing to fail over to, and no circuit.
 */

/** The code of an open circuit in `transport_pauses`. */
export const CIRCUIT_OPEN = 'circuit-open'

/**
 * The statements that count a failed try against its transport's circuit,
 * and open the circuit when the count reaches `threshold` (or count a refused
 * probe of one already open); none for a failure that says nothing of the
 * provider's health (a refusal, a rate limit), nor with one transport.
 */
export function circuitStatements(
  db: D1Database,
  transport: string,
  error: SendError,
  options: { now: Date; threshold: number; transports: number; notificationId: string },
): D1PreparedStatement[] {
  if (!error.outage || options.transports < 2) return []
  const at = options.now.toISOString()
  const reason = `${options.threshold} or more failures in a row that say the provider may be down (the last: ${error.providerCode ?? 'no answer'})`
  return [
    db
      .prepare(
        `INSERT INTO transport_failures (transport, failures, since, updated_at) VALUES (?1, 1, ?2, ?2)
         ON CONFLICT (transport) DO UPDATE SET failures = transport_failures.failures + 1, updated_at = ?2`,
      )
      .bind(transport, at),
    pauseTransport(db, transport, CIRCUIT_OPEN, reason, options.now, null, options.notificationId, options.threshold),
    // Paused now (or already): the count starts again, so a circuit that opened counts anew once it closes
    // (by hand too), and the sends still in flight do not relabel a pause of another cause. A refused probe
    // pushes the next one out all the same (`pauseTransport`).
    db
      .prepare(
        `UPDATE transport_failures SET failures = 0
         WHERE transport = ?1 AND EXISTS (SELECT 1 FROM transport_pauses WHERE transport = ?1)`,
      )
      .bind(transport),
  ]
}
