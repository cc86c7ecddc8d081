import { z } from '@hono/zod-openapi'
import { auditChange } from '../../audit/audit-store.ts'
import { configOf } from '../../config.ts'
import { allShardDbs, byColumns, rowsEverywhere } from '../../d1/shards.ts'
import { pseudonymOf } from '../../erasure/pseudonym.ts'
import { ApiError } from '../../errors.ts'
import {
  deleteSuppression,
  normalizeAddress,
  putSuppression,
  type Suppression,
  type SuppressionRow,
  suppressionFromRow,
  suppressionOf,
} from '../../suppression/suppression-store.ts'
import { runAudited } from '../audited.ts'
import { ADMIN_ERRORS, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const Cause = z.enum(['hard-bounce', 'soft-bounce', 'complaint', 'provider', 'operator'])

const SuppressionSchema = z
  .object({
    address: z.string(),
    cause: Cause,
    reason: z.string(),
    until: z.string().nullable().openapi({ description: 'when it ends; null: until removed' }),
    active: z.boolean().openapi({ description: 'whether dispatch skips the address now' }),
    source: z.string().openapi({ description: 'cloudflare, resend or operator' }),
    notificationId: z.string().nullable(),
    providerEvent: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi('Suppression')

const AddressParam = z.object({
  address: z
    .email()
    .max(320)
    .openapi({ param: { name: 'address', in: 'path' }, example: 'user@example.com' }),
})

const show = (entry: Suppression, now: string): z.infer<typeof SuppressionSchema> => ({
  ...entry,
  active: entry.until === null || entry.until > now,
})

/** Opaque page cursor: the last address of the page. */
const encodeCursor = (address: string) => btoa(String.fromCharCode(...new TextEncoder().encode(address)))
function decodeCursor(cursor: string): string {
  try {
    return new TextDecoder().decode(Uint8Array.from(atob(cursor), (char) => char.charCodeAt(0)))
  } catch {
    throw new ApiError('INVALID_REQUEST', 'the cursor is not one this API gave', [
      { field: 'cursor', message: 'not a cursor of this list' },
    ])
  }
}

const list = operatorRoute('viewer', {
  method: 'get',
  path: '/',
  summary: 'The suppression list',
  description: 'In address order; pages never repeat or skip an address whatever is added meanwhile.',
  request: {
    query: z.object({
      cause: Cause.optional(),
      source: z.string().min(1).max(50).optional(),
      active: z.enum(['true', 'false']).optional().openapi({ description: 'only entries in force (or ended)' }),
      limit: z.coerce.number().int().min(1).max(500).default(50),
      cursor: z.string().max(2000).optional(),
    }),
  },
  responses: {
    200: json(z.object({ items: z.array(SuppressionSchema), nextCursor: z.string().nullable() }), 'A page'),
    ...errors(400, ...ADMIN_ERRORS),
  },
})

const get = operatorRoute('viewer', {
  method: 'get',
  path: '/{address}',
  summary: 'Whether an address is suppressed, why and until when',
  request: { params: AddressParam },
  responses: { 200: json(SuppressionSchema, 'The entry'), ...errors(400, 404, ...ADMIN_ERRORS) },
})

const put = operatorRoute('admin', {
  method: 'put',
  path: '/{address}',
  summary: 'Suppress an address (an operator’s entry replaces whatever was there)',
  request: {
    params: AddressParam,
    body: jsonBody(
      z.object({
        reason: z.string().min(1).max(500),
        until: z.iso
          .datetime({ offset: true })
          .optional()
          .openapi({ description: 'when it ends; without it, until removed' }),
      }),
    ),
  },
  responses: { 200: json(SuppressionSchema, 'Saved'), ...errors(...BODY_ERRORS, ...ADMIN_ERRORS) },
})

const remove = operatorRoute('admin', {
  method: 'delete',
  path: '/{address}',
  summary: 'Remove an address from the list: mail to it is sent again',
  request: { params: AddressParam },
  responses: { 204: { description: 'Removed' }, ...errors(400, 404, ...ADMIN_ERRORS) },
})

/** An address's entry from the first D1 shard that has one, the primary first (src/d1/shards.ts). */
async function suppressionAnywhere(dbs: readonly D1Database[], address: string, pseudonym: string) {
  const found = await Promise.all(dbs.map((db) => suppressionOf(db, address, pseudonym)))
  return found.find((entry) => entry !== undefined && entry !== null)
}

/** `/v1/suppressions`: addresses dispatch does not send to. */
export const suppressions = createRouter()
  .openapi(list, async (c) => {
    const query = c.req.valid('query')
    const now = new Date().toISOString()
    const after = query.cursor === undefined ? null : decodeCursor(query.cursor)
    // Every D1 shard keeps the list for its recipients (src/d1/shards.ts): one page of each, merged by
    // address, an address in several shards once (the primary's entry first).
    const [found = []] = await rowsEverywhere(c.env, (db) => [
      db
        .prepare(
          `SELECT * FROM suppressions
           WHERE (?1 IS NULL OR address > ?1) AND (?2 IS NULL OR cause = ?2) AND (?3 IS NULL OR source = ?3)
             AND (?4 IS NULL OR (?4 = 'true') = (until IS NULL OR until > ?5))
           ORDER BY address LIMIT ?6`,
        )
        .bind(after, query.cause ?? null, query.source ?? null, query.active ?? null, now, query.limit + 1),
    ])
    const byAddress = new Map<string, SuppressionRow>()
    for (const row of found as SuppressionRow[]) if (!byAddress.has(row.address)) byAddress.set(row.address, row)
    const results = [...byAddress.values()].sort(byColumns('address'))
    const page = results.slice(0, query.limit).map((row) => show(suppressionFromRow(row), now))
    const last = page.at(-1)
    return c.json(
      { items: page, nextCursor: results.length > query.limit && last ? encodeCursor(last.address) : null },
      200,
    )
  })
  .openapi(get, async (c) => {
    const { address } = c.req.valid('param')
    const pseudonym = await pseudonymOf(address, configOf(c.env).erasureKey)
    const entry = await suppressionAnywhere(allShardDbs(c.env), address, pseudonym)
    if (!entry) throw new ApiError('NOT_FOUND', 'the address is not on the suppression list')
    return c.json(show(entry, new Date().toISOString()), 200)
  })
  .openapi(put, async (c) => {
    const { address } = c.req.valid('param')
    const body = c.req.valid('json')
    const now = new Date().toISOString()
    const until = body.until === undefined ? null : new Date(body.until).toISOString()
    if (until !== null && until <= now) {
      throw new ApiError('INVALID_REQUEST', 'until is in the past', [
        { field: 'until', message: 'must be in the future (or left out for an entry without end)' },
      ])
    }
    const entry = {
      address: normalizeAddress(address),
      cause: 'operator' as const,
      reason: body.reason,
      until,
      source: 'operator',
      notificationId: null,
      providerEvent: null,
    }
    const [result] = await runAudited(c, [putSuppression(c.env.DB, entry, now)], {
      action: 'suppression.put',
      target: entry.address,
      parameters: { reason: body.reason, until },
    })
    // The other D1 shards next: any of them may hold a recipient at the address. A failure here fails
    // the request, and putting it again writes the same entry.
    await Promise.all(
      allShardDbs(c.env)
        .slice(1)
        .map((db) => putSuppression(db, entry, now).run()),
    )
    const row = result?.results?.[0] as SuppressionRow
    return c.json(show(suppressionFromRow(row), now), 200)
  })
  .openapi(remove, async (c) => {
    const { address } = c.req.valid('param')
    const pseudonym = await pseudonymOf(address, configOf(c.env).erasureKey)
    // The trail names the entry as the list keeps it: an erased address stays a pseudonym there too.
    const dbs = allShardDbs(c.env)
    // Whichever D1 shard has it: an erased address's entry may be in one shard only, under its pseudonym.
    const stored = await suppressionAnywhere(dbs, address, pseudonym)
    const target = stored?.address ?? normalizeAddress(address)
    let removed: number
    if (dbs.length === 1) {
      const [result] = await runAudited(c, [deleteSuppression(c.env.DB, address, pseudonym)], {
        action: 'suppression.delete',
        target,
      })
      removed = result?.meta.changes ?? 0
    } else {
      // From every D1 shard, then one audit row in the primary counting them all.
      // One entry, kept in each shard: the trail counts it once, as one database would.
      const results = await Promise.all(dbs.map((db) => deleteSuppression(db, address, pseudonym).run()))
      removed = Math.max(...results.map((result) => result.meta.changes ?? 0))
      if (removed > 0) {
        const entry = { action: 'suppression.delete', target, affected: removed }
        await auditChange(c.env.DB, c.get('operator'), entry, new Date().toISOString()).run()
      }
    }
    if (removed === 0) {
      throw new ApiError('NOT_FOUND', 'the address is not on the suppression list')
    }
    return c.body(null, 204)
  })
