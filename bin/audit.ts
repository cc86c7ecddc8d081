/** `notify-edge audit list`: the operators' changes, newest first. */
import type { AuditRecord } from '../src/audit/record.ts'
import type { Client } from './client.ts'
import { renderTable } from './table.ts'

/** The options `audit list` reads. */
export type AuditOptions = {
  action?: string
  actor?: string
  target?: string
  since?: string
  until?: string
  limit?: string
  all?: boolean
  json?: boolean
}

/** Every page with `--all`, else one; a table, or JSON with `--json`. */
export async function auditList(api: Client, options: AuditOptions): Promise<string> {
  const query = new URLSearchParams({ limit: options.limit ?? '50' })
  for (const key of ['action', 'actor', 'target', 'since', 'until'] as const) {
    const value = options[key]
    if (value) query.set(key, value)
  }
  const items: AuditRecord[] = []
  let cursor: string | null = null
  let more = false
  do {
    if (cursor) query.set('cursor', cursor)
    const page = (await api.get(`/v1/audit?${query}`)) as { items: AuditRecord[]; nextCursor: string | null }
    items.push(...page.items)
    more = page.nextCursor !== null
    cursor = options.all ? page.nextCursor : null
  } while (cursor)
  if (options.json) return JSON.stringify(items, null, 2)
  if (items.length === 0) return 'no changes recorded'
  const table = renderTable(
    ['AT', 'ACTOR', 'VIA', 'ACTION', 'TARGET', 'AFFECTED', 'PARAMETERS'],
    items.map((item) => [
      item.at,
      item.actor,
      item.via,
      item.action,
      item.target ?? '',
      item.affected,
      JSON.stringify(item.parameters).slice(0, 60),
    ]),
  )
  return more && !options.all ? `${table}\n(more: --all, or --limit)` : table
}
