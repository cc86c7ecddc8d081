import { z } from '@hono/zod-openapi'
import { type AuditRow, auditFromRow } from '../../audit/audit-store.ts'
import { ADMIN_ERRORS, createRouter, errors, json } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const Iso = z.iso.datetime({ offset: true })

const AuditRecordSchema = z
  .object({
    id: z.number().int(),
    at: z.string(),
    actor: z.string().openapi({ description: '`admin token`, or the e-mail of a Cloudflare Access identity' }),
    role: z.enum(['admin', 'viewer']),
    via: z.enum(['api', 'cli', 'console']),
    action: z.string().openapi({ example: 'dead-letter.replay' }),
    target: z.string().nullable(),
    parameters: z.record(z.string(), z.unknown()),
    affected: z.number().int().openapi({ description: 'rows the change affected' }),
  })
  .openapi('AuditRecord')

const list = operatorRoute('viewer', {
  method: 'get',
  path: '/',
  summary: 'The audit trail: every change an operator made, newest first',
  description:
    'Written in the same transaction as the change, only when something changed. Rows are never updated or deleted.',
  request: {
    query: z.object({
      actor: z.string().min(1).max(320).optional(),
      action: z.string().min(1).max(100).optional(),
      target: z.string().min(1).max(400).optional(),
      since: Iso.optional().openapi({ description: 'at or after (ISO-8601)' }),
      until: Iso.optional().openapi({ description: 'before (ISO-8601)' }),
      limit: z.coerce.number().int().min(1).max(500).default(50),
      cursor: z
        .string()
        .regex(/^[1-9]\d{0,15}$/, 'a cursor this API gave out')
        .optional()
        .openapi({ description: 'nextCursor of the previous page' }),
    }),
  },
  responses: {
    200: json(z.object({ items: z.array(AuditRecordSchema), nextCursor: z.string().nullable() }), 'A page'),
    ...errors(400, ...ADMIN_ERRORS),
  },
})

/** `/v1/audit`: who changed what. Read-only; there is no route that changes it. */
export const audit = createRouter().openapi(list, async (c) => {
  const { actor, action, target, since, until, limit, cursor } = c.req.valid('query')
  const { results } = await c.env.DB.prepare(
    `SELECT * FROM audit_log
     WHERE (?1 IS NULL OR actor = ?1) AND (?2 IS NULL OR action = ?2) AND (?3 IS NULL OR target = ?3)
       AND (?4 IS NULL OR at >= ?4) AND (?5 IS NULL OR at < ?5) AND (?6 IS NULL OR id < ?6)
     ORDER BY id DESC LIMIT ?7`,
  )
    .bind(
      actor ?? null,
      action ?? null,
      target ?? null,
      since ? new Date(since).toISOString() : null,
      until ? new Date(until).toISOString() : null,
      cursor ? Number(cursor) : null,
      limit + 1,
    )
    .all<AuditRow>()
  const page = results.slice(0, limit)
  const last = page.at(-1)
  return c.json(
    {
      items: page.map(auditFromRow) as z.infer<typeof AuditRecordSchema>[],
      nextCursor: results.length > limit && last ? String(last.id) : null,
    },
    200,
  )
})
