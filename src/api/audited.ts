import type { Context } from 'hono'
import { type AuditEntry, auditChange } from '../audit/audit-store.ts'
import type { AppEnv } from './openapi.ts'

/**
 * Runs an operator's change and its audit row in one D1 batch (one
 * transaction): the row says who (the request's operator), what, to what, and
 * how many rows changed — and is written only when something did.
 */
export async function runAudited(
  c: Context<AppEnv>,
  statements: D1PreparedStatement[],
  entry: AuditEntry,
): Promise<D1Result[]> {
  const audit = auditChange(c.env.DB, c.get('operator'), entry, new Date().toISOString())
  const results = await c.env.DB.batch([...statements, audit])
  return results.slice(0, statements.length)
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
