import { z } from '@hono/zod-openapi'
import { auditChange } from '../../audit/audit-store.ts'
import { allShardDbs, byColumns, rowsEverywhere } from '../../d1/shards.ts'
import {
  bodiesOf,
  type DeadLetterSummaryRow,
  decodeCursor,
  encodeCursor,
  getDeadLetter,
  listDeadLetters,
} from '../../dead-letters/reads.ts'
import { REPLAY_PAGE_BYTES, replayDeadLetters, replayPage } from '../../dead-letters/replay.ts'
import { discardOpen, markDiscarded } from '../../dead-letters/resolve.ts'
import { ApiError } from '../../errors.ts'
import { loggerFor } from '../../log.ts'
import { runAudited } from '../audited.ts'
import { ADMIN_ERRORS, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const Status = z.enum(['open', 'replayed', 'discarded'])
const Iso = z.iso.datetime({ offset: true })

/** Filters shared by the list and the bulk replay. */
const Filters = z.object({
  status: Status.optional(),
  code: z.string().min(1).optional(),
  queue: z.string().min(1).optional(),
  source: z.enum(['postgres', 'rabbitmq', 'kafka', 'http']).optional(),
  kind: z.string().min(1).optional(),
  since: Iso.optional().openapi({ description: 'first seen at or after (ISO-8601)' }),
  until: Iso.optional().openapi({ description: 'first seen before (ISO-8601)' }),
  q: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .openapi({ description: 'free text: an event id or source message id, or a piece of the error' }),
})

export const DeadLetterSummary = z
  .object({
    id: z.string(),
    queue: z.string(),
    code: z.string(),
    error: z.string(),
    attempts: z.number().nullable(),
    source: z.string().nullable(),
    origin: z.string().nullable(),
    eventId: z.string().nullable(),
    eventType: z.string().nullable(),
    kind: z.string().nullable(),
    status: Status,
    failures: z.number(),
    replays: z.number(),
    firstSeen: z.string(),
    lastSeen: z.string(),
  })
  .openapi('DeadLetterSummary')

const DeadLetter = DeadLetterSummary.extend({
  body: z.unknown().openapi({ description: 'the original queue message' }),
  headers: z
    .record(z.string(), z.string())
    .nullable()
    .openapi({ description: 'the source headers, for an inbound event' }),
  history: z.array(z.object({ at: z.string(), code: z.string(), error: z.string(), attempts: z.number().nullable() })),
  discardReason: z.string().nullable(),
  replayedAt: z.string().nullable(),
}).openapi('DeadLetter')

/** A dead-letter row as the API shows it. */
export function summaryOf(row: DeadLetterSummaryRow): z.infer<typeof DeadLetterSummary> {
  return {
    id: row.id,
    queue: row.queue,
    code: row.code,
    error: row.error,
    attempts: row.attempts,
    source: row.source,
    origin: row.origin,
    eventId: row.event_id,
    eventType: row.event_type,
    kind: row.kind,
    status: row.status as z.infer<typeof Status>,
    failures: row.failures,
    replays: row.replays,
    firstSeen: row.first_seen,
    lastSeen: row.last_seen,
  }
}

const IdParam = z.object({
  id: z
    .string()
    .min(1)
    .max(128)
    .openapi({ param: { name: 'id', in: 'path' } }),
})

const list = operatorRoute('viewer', {
  method: 'get',
  path: '/',
  summary: 'List dead letters',
  description: 'Filters combine; pages follow a stable (firstSeen, id) order, so inserts meanwhile never shift a page.',
  request: {
    query: Filters.extend({
      limit: z.coerce.number().int().min(1).max(500).default(50),
      cursor: z.string().max(500).optional(),
      order: z.enum(['asc', 'desc']).default('asc'),
    }),
  },
  responses: {
    200: json(
      z.object({ items: z.array(DeadLetterSummary), nextCursor: z.string().nullable() }),
      'A page of dead letters',
    ),
    ...errors(400, ...ADMIN_ERRORS),
  },
})

const show = operatorRoute('viewer', {
  method: 'get',
  path: '/{id}',
  summary: 'One dead letter: original body and headers, attempts, error history',
  request: { params: IdParam },
  responses: { 200: json(DeadLetter, 'The dead letter'), ...errors(400, 404, ...ADMIN_ERRORS) },
})

const ReplayResult = z
  .object({
    replayed: z.array(z.string()),
    skipped: z.array(z.object({ id: z.string(), reason: z.string() })),
  })
  .openapi('ReplayResult')

const replayOne = operatorRoute('admin', {
  method: 'post',
  path: '/{id}/replay',
  summary: 'Send the original message back to the queue it died on',
  description:
    'Marks the dead letter `replayed` and counts replays. An event processed since ends as a duplicate: no second email.',
  request: { params: IdParam },
  responses: { 200: json(ReplayResult, 'Replayed'), ...errors(400, 404, 409, 503, ...ADMIN_ERRORS) },
})

const discard = operatorRoute('admin', {
  method: 'post',
  path: '/{id}/discard',
  summary: 'Discard a dead letter, with a reason',
  request: {
    params: IdParam,
    body: jsonBody(z.object({ reason: z.string().trim().min(1).max(1000) })),
  },
  responses: { 200: json(DeadLetterSummary, 'Discarded'), ...errors(...BODY_ERRORS, 404, ...ADMIN_ERRORS) },
})

const bulk = operatorRoute('admin', {
  method: 'post',
  path: '/replay',
  summary: 'Replay every dead letter matching the filters (open ones by default)',
  description: `One page per call, in (firstSeen, id) order: at most \`max\`, and at most ${REPLAY_PAGE_BYTES} bytes of bodies, so one call stays within a Worker's memory and subrequests; \`nextCursor\` continues.`,
  request: {
    body: jsonBody(
      Filters.extend({
        dryRun: z.boolean().default(false),
        max: z.number().int().min(1).max(1000).default(100),
        cursor: z.string().max(500).optional().openapi({ description: 'nextCursor of the previous call' }),
      }),
    ),
  },
  responses: {
    200: json(
      ReplayResult.extend({
        dryRun: z.boolean(),
        matched: z.array(DeadLetterSummary),
        nextCursor: z.string().nullable().openapi({
          description: 'set when more may match after this page: send the same request again with it as `cursor`',
        }),
      }),
      'What was (or, with dryRun, would be) replayed',
    ),
    ...errors(...BODY_ERRORS, 503, ...ADMIN_ERRORS),
  },
})

const bulkDiscard = operatorRoute('admin', {
  method: 'post',
  path: '/discard',
  summary: 'Discard every open dead letter matching the filters, with a reason',
  description: 'Only open ones: a replayed or discarded dead letter keeps its state. `dryRun` shows what would be.',
  request: {
    body: jsonBody(
      Filters.omit({ status: true }).extend({
        reason: z.string().trim().min(1).max(1000),
        dryRun: z.boolean().default(false),
        max: z.number().int().min(1).max(1000).default(100),
      }),
    ),
  },
  responses: {
    200: json(
      z.object({ dryRun: z.boolean(), matched: z.array(DeadLetterSummary), discarded: z.array(z.string()) }),
      'What was (or, with dryRun, would be) discarded',
    ),
    ...errors(...BODY_ERRORS, ...ADMIN_ERRORS),
  },
})

/** `/v1/dead-letters`: inspect, replay and discard what failed. */
export const deadLetters = createRouter()
  .openapi(list, async (c) => {
    const { limit, cursor: cursorText, order, ...filter } = c.req.valid('query')
    const cursor = cursorText === undefined ? undefined : decodeCursor(cursorText)
    if (cursorText !== undefined && !cursor) {
      throw new ApiError('INVALID_REQUEST', 'cursor is not one this API gave out', [
        { field: 'cursor', message: 'unknown cursor' },
      ])
    }
    // Every D1 shard keeps the dead letters of its recipients' notifications (src/d1/shards.ts): a page of
    // each, merged in the list's (first_seen, id) order, which the cursor holds across shards.
    const [found = []] = await rowsEverywhere(c.env, (db) => [
      listDeadLetters(db, filter, { cursor, limit: limit + 1, order }),
    ])
    const results = inOrder(found as DeadLetterSummaryRow[], order)
    const page = results.slice(0, limit)
    const last = page.at(-1)
    return c.json(
      { items: page.map(summaryOf), nextCursor: results.length > limit && last ? encodeCursor(last) : null },
      200,
    )
  })
  .openapi(show, async (c) => {
    const row = (await findDeadLetter(c.env, c.req.valid('param').id))?.row
    if (!row) throw new ApiError('NOT_FOUND', 'no such dead letter')
    const body = JSON.parse(String(row.body)) as { headers?: unknown }
    const headers = typeof body === 'object' && body !== null && typeof body.headers === 'object' ? body.headers : null
    return c.json(
      {
        ...summaryOf(row as DeadLetterSummaryRow),
        body,
        headers: headers as Record<string, string> | null,
        history: JSON.parse(String(row.history)),
        discardReason: (row.discard_reason as string | null) ?? null,
        replayedAt: (row.replayed_at as string | null) ?? null,
      },
      200,
    )
  })
  .openapi(replayOne, async (c) => {
    const found = await findDeadLetter(c.env, c.req.valid('param').id)
    if (!found) throw new ApiError('NOT_FOUND', 'no such dead letter')
    const row = found.row as { id: string; queue: string; body: string }
    const now = new Date()
    const audit = (affected?: number) =>
      auditChange(
        c.env.DB,
        c.get('operator'),
        { action: 'dead-letter.replay', target: row.id, ...(affected ? { affected } : {}) },
        now.toISOString(),
      )
    const result = await replayOrUnavailable(c.env, [row], now, audit, found.db)
    if (result.replayed.length === 0) throw new ApiError('CONFLICT', `cannot replay: ${result.skipped[0]?.reason}`)
    return c.json(result, 200)
  })
  .openapi(discard, async (c) => {
    const { id } = c.req.valid('param')
    const { reason } = c.req.valid('json')
    const entry = { action: 'dead-letter.discard', target: id, parameters: { reason } }
    // The audit row only when the discard changed a row: a 404 leaves no trace in D1.
    const db = (await findDeadLetter(c.env, id))?.db ?? c.env.DB
    const [discarded] = await runAudited(c, [markDiscarded(db, id, reason, new Date().toISOString())], entry, db)
    if (!discarded?.meta.changes) throw new ApiError('NOT_FOUND', 'no such dead letter')
    const row = await getDeadLetter(db, id).first<DeadLetterSummaryRow>()
    return c.json(summaryOf(row as DeadLetterSummaryRow), 200)
  })
  .openapi(bulk, async (c) => {
    const { dryRun, max, cursor: cursorText, ...filter } = c.req.valid('json')
    const cursor = cursorText === undefined ? undefined : decodeCursor(cursorText)
    if (cursorText !== undefined && !cursor) {
      throw new ApiError('INVALID_REQUEST', 'cursor is not one this API gave out', [
        { field: 'cursor', message: 'unknown cursor' },
      ])
    }
    // The sizes first, without the bodies: the page is cut to what one call can hold.
    const [found = []] = await rowsEverywhere(c.env, (db) => [
      listDeadLetters(
        db,
        { ...filter, status: filter.status ?? 'open' },
        { cursor, limit: max + 1, order: 'asc', bodyBytes: true },
      ),
    ])
    const results = inOrder(found as (DeadLetterSummaryRow & { body_bytes: number | null })[], 'asc')
    const page = replayPage(results, max)
    const last = page.at(-1)
    const nextCursor = page.length < results.length && last ? encodeCursor(last) : null
    const matched = page.map(summaryOf)
    if (dryRun || page.length === 0) return c.json({ dryRun, matched, replayed: [], skipped: [], nextCursor }, 200)
    const now = new Date()
    const parameters = { ...filter, max, ...(cursorText === undefined ? {} : { cursor: cursorText }) }
    const result: z.infer<typeof ReplayResult> = { replayed: [], skipped: [] }
    // Shard by shard: each shard's rows are read, replayed and marked there, each with its audit row.
    for (const db of allShardDbs(c.env)) {
      const ids = page.map((row) => row.id)
      const { results: bodies } = await bodiesOf(db, ids).all<{ id: string; queue: string; body: string }>()
      if (bodies.length === 0) continue
      const byId = new Map(bodies.map((row) => [row.id, row]))
      const rows = page.flatMap((row) => byId.get(row.id) ?? [])
      const audit = (affected?: number) =>
        auditChange(
          c.env.DB,
          c.get('operator'),
          { action: 'dead-letters.replay', target: null, parameters, ...(affected ? { affected } : {}) },
          now.toISOString(),
        )
      const part = await replayOrUnavailable(c.env, rows, now, audit, db)
      result.replayed.push(...part.replayed)
      result.skipped.push(...part.skipped)
    }
    return c.json({ dryRun, matched, ...result, nextCursor }, 200)
  })
  .openapi(bulkDiscard, async (c) => {
    const { dryRun, max, reason, ...filter } = c.req.valid('json')
    const [found = []] = await rowsEverywhere(c.env, (db) => [
      listDeadLetters(db, { ...filter, status: 'open' }, { limit: max, order: 'asc' }),
    ])
    const results = inOrder(found as DeadLetterSummaryRow[], 'asc').slice(0, max)
    const matched = results.map(summaryOf)
    const ids = results.map((row) => row.id)
    if (dryRun || ids.length === 0) return c.json({ dryRun, matched, discarded: [] }, 200)
    const entry = { action: 'dead-letters.discard', target: null, parameters: { ...filter, reason, max } }
    const discarded: string[] = []
    for (const db of allShardDbs(c.env)) {
      const [changed] = await runAudited(c, [discardOpen(db, ids, reason, new Date().toISOString())], entry, db)
      // Anything replayed or discarded meanwhile kept its state; the answer names what this call changed,
      // as the statement returned it. (Not from `meta.changes`: D1 counts the counters' trigger rows in it.)
      discarded.push(...((changed?.results ?? []) as { id: string }[]).map((row) => row.id))
    }
    return c.json({ dryRun, matched, discarded }, 200)
  })

/** Rows merged from several shards, in the list's (first_seen, id) order. */
function inOrder<T extends DeadLetterSummaryRow>(rows: T[], order: 'asc' | 'desc'): T[] {
  const ascending = rows.sort(byColumns('first_seen', 'id'))
  return order === 'asc' ? ascending : ascending.reverse()
}

/** A dead letter by its id, and the D1 shard keeping it (src/d1/shards.ts). */
async function findDeadLetter(
  env: Env,
  id: string,
): Promise<{ db: D1Database; row: Record<string, unknown> } | undefined> {
  const found = await Promise.all(
    allShardDbs(env).map(async (db) => ({ db, row: await getDeadLetter(db, id).first<Record<string, unknown>>() })),
  )
  const hit = found.find((entry) => entry.row !== null)
  return hit ? { db: hit.db, row: hit.row as Record<string, unknown> } : undefined
}

async function replayOrUnavailable(
  env: Env,
  rows: { id: string; queue: string; body: string }[],
  now: Date,
  audit: (affected?: number) => D1PreparedStatement,
  letters: D1Database = env.DB,
) {
  try {
    return await replayDeadLetters(env, rows, now, audit, letters)
  } catch (error) {
    loggerFor(env).error('replay.failed', { count: rows.length, error })
    throw new ApiError('QUEUE_UNAVAILABLE', 'the replay could not be sent; nothing was marked, try again')
  }
}
