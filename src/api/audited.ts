import type { Context } from 'hono'
import { type AuditEntry, auditChange } from '../audit/audit-store.ts'
import type { AppEnv } from './openapi.ts'

/**
 * Runs an operator's change and its audit row in one D1 batch (one
 * transaction): the row says who (the request's operator), what, to what, and
 * how many rows changed — and is written only when something did. A change
 * in a D1 shard other than the primary (`db`, src/d1/shards.ts) cannot share
 * the primary's transaction: it is written first, then its audit row in the
 * primary, counting what the entry says or else the rows its last statement changed; should that second write fail, the
 * request fails with the change made, and saying it again audits it then.
 */
export async function runAudited(
  c: Context<AppEnv>,
  statements: D1PreparedStatement[],
  entry: AuditEntry,
  db: D1Database = c.env.DB,
): Promise<D1Result[]> {
  const now = new Date().toISOString()
  if (db === c.env.DB) {
    const audit = auditChange(c.env.DB, c.get('operator'), entry, now)
    const results = await c.env.DB.batch([...statements, audit])
    return results.slice(0, statements.length)
  }
  const results = await db.batch(statements)
  // As `changes()` counts in the one-transaction case: the last statement's rows.
  const affected = entry.affected ?? results.at(-1)?.meta.changes ?? 0
  if (affected > 0) await auditChange(c.env.DB, c.get('operator'), { ...entry, affected }, now).run()
  return results
}

/**
 * Records an operator's unmasked read of personal data — who, which record,
 * what was revealed (never the data itself) — before the data is answered:
 * when the row cannot be written the read fails, so no unmasked read goes
 * unrecorded. Reads are recorded for every role, admins included.
 */
export async function recordRead(
  c: Context<AppEnv>,
  entry: Omit<AuditEntry, 'affected'> & { parameters: Record<string, unknown> },
): Promise<void> {
  await auditChange(c.env.DB, c.get('operator'), { ...entry, affected: 1 }, new Date().toISOString()).run()
}
