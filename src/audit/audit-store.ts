import type { Operator } from './operator.ts'
import type { AuditRecord } from './record.ts'

export type { AuditRecord }

/** One change an operator made. */
export type AuditEntry = {
  action: string
  target: string | null
  parameters?: Record<string, unknown>
  /** Rows affected, when the change took several statements; otherwise `changes()` of the one before. */
  affected?: number
}

/** An `audit_log` row as D1 returns it. */
export type AuditRow = Omit<AuditRecord, 'parameters'> & { parameters: string }

/** An audit row for the API. */
export function auditFromRow(row: AuditRow): AuditRecord {
  return { ...row, parameters: JSON.parse(row.parameters) as Record<string, unknown> }
}

/**
 * The audit row of a change, to run in the same `DB.batch` right after the
 * statement that made it: `changes()` is that statement's row count, and the
 * batch's one transaction means there is never a change without its row, nor
 * a row without its change. A statement that changed nothing (a 404, a
 * replay of nothing) leaves no row: the trail records changes, not attempts.
 */
export function auditChange(db: D1Database, operator: Operator, entry: AuditEntry, now: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO audit_log (at, actor, role, via, action, target, parameters, affected)
       SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, coalesce(?8, changes()) WHERE coalesce(?8, changes()) > 0`,
    )
    .bind(
      now,
      operator.name,
      operator.role,
      operator.via,
      entry.action,
      entry.target,
      JSON.stringify(entry.parameters ?? {}),
      entry.affected ?? null,
    )
}

/**
 * Retention of the audit trail: deletes the oldest rows older than `before`,
 * at most `limit`. The delete trigger lets only rows older than 364 days go
 * (migration 0010), so an audit retention configured shorter could not delete
 * a younger row even by mistake. Parameters: before, limit.
 */
export function pruneAudit(db: D1Database, before: string, limit: number): D1PreparedStatement {
  return db
    .prepare('DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < ?1 ORDER BY at LIMIT ?2)')
    .bind(before, limit)
}
