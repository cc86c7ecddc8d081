import { heldBy } from './sql.ts'

/**
 * Extends the lease of every notification still `sending` under `token`.
 * Parameters: claim token, lease until, now.
 */
export function renewLease(db: D1Database, token: string, leaseUntil: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET lease_until = ?2, updated_at = ?3
       WHERE ${heldBy('?1')}`,
    )
    .bind(token, leaseUntil, now)
}
