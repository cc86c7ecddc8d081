import { z } from '@hono/zod-openapi'
import { auditChange } from '../../audit/audit-store.ts'
import { configOf } from '../../config.ts'
import { ApiError } from '../../errors.ts'
import { fromOpaque, toOpaque } from '../../opaque.ts'
import { GROW_PAGE_MAX, GROW_PHASES, type GrowCursor, growStep } from '../../shards/grow.ts'
import { ADMIN_ERRORS, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

/**
 * How long after the hold is first seen a grow may start: an invocation of
 * the version before it — a queue consumer's or the cron's — may still be
 * writing, for up to 15 minutes of wall time
 * (https://developers.cloudflare.com/queues/platform/limits/, "Consumer
 * duration"), and a minute more.
 */
export const GROW_SETTLE_SECONDS = 16 * 60

const GrowRequest = z
  .strictObject({
    to: z
      .number()
      .int()
      .min(2)
      .openapi({ description: 'the new count: twice DB_SHARDS, as DB_SHARDS_GROWING_TO says' }),
    cursor: z
      .string()
      .max(2000)
      .optional()
      .openapi({ description: "the last answer's `cursor`; without one, the grow starts, or goes on where it is" }),
    limit: z
      .number()
      .int()
      .min(1)
      .max(GROW_PAGE_MAX)
      .default(200)
      .openapi({ description: 'the most rows of one table this call reads and moves' }),
  })
  .openapi('ShardGrowRequest')

const GrowAnswer = z
  .object({
    cursor: z.string().nullable().openapi({ description: 'for the next call; null when the grow is over' }),
    at: z
      .string()
      .nullable()
      .openapi({ description: 'where the next call goes on: the old shard and the table, or `finish`' }),
    copied: z.record(z.string(), z.number().int()).openapi({
      description:
        'rows this call copied into a new shard, by table (those of a recipient were deleted from the old shard too; suppressions and erased pseudonyms are kept in both)',
    }),
  })
  .openapi('ShardGrow')

const grow = operatorRoute('admin', {
  method: 'post',
  path: '/grow',
  summary: 'Move each recipient to their shard of twice as many D1 databases, a page per call',
  description:
    "Only while DB_SHARDS_GROWING_TO is twice DB_SHARDS (the hold: the cron and the consumers wait, changes answer 503) and the queues' delivery is paused: docs/scaling.md gives the steps, and `notify-edge shards grow` makes the calls. The first call records when it saw the hold and refuses (409, `Retry-After`) until 16 minutes later, when no invocation from before the hold can still be writing; only the cursor the grow stored moves rows: a call with another one, or none, is answered with it. Each old shard gives the new one its recipients' contacts, preferences, throttle windows, notifications (with their sent messages, delivery events, processed marks, bundles and dead letters), after undoing a bundle the move would split, and copies its suppressions, erased pseudonyms and transport pauses; the last call hands the moved rows' counts over. A call that fails may be made again.",
  request: { body: jsonBody(GrowRequest) },
  responses: {
    200: json(GrowAnswer, 'One page moved'),
    ...errors(...BODY_ERRORS, 409, ...ADMIN_ERRORS),
  },
})

const CursorSchema = z.union([
  z.strictObject({ shard: z.number().int().min(0), phase: z.literal('finish') }),
  z.strictObject({ shard: z.number().int().min(0), phase: z.enum(GROW_PHASES), after: z.string() }),
])

/**
 * The grow's place, from the text the primary stores: written by this route, so one that does not parse
 * (or names an old shard past DB_SHARDS) means DB_SHARDS changed under a grow that had begun.
 */
function decode(text: string, from: number): GrowCursor {
  const parsed = CursorSchema.safeParse(fromOpaque(text))
  if (parsed.success && parsed.data.shard < from) return parsed.data as GrowCursor
  throw new ApiError(
    'CONFLICT',
    `the grow's stored place is not one of a grow from DB_SHARDS = ${from}: was DB_SHARDS changed while it ran?`,
  )
}

type Begun = { done: true } | { stored: string | null }

/**
 * Where a grow is, from its row in the primary: the first call records when
 * it saw the hold, and every call refuses until the hold has settled; a grow
 * begun goes on from the cursor it stored, whatever cursor a call brings (a
 * restarted command line needs none; a late or made-up one moves nothing);
 * one that finished is over.
 */
async function begin(db: D1Database, to: number, now: Date): Promise<Begun> {
  const [, row] = await db.batch<{ held_at: string; cursor: string | null; finished_at: string | null }>([
    db
      .prepare(
        `INSERT INTO shard_grows (to_count, held_at) VALUES (?1, ?2)
         ON CONFLICT (to_count) DO UPDATE SET held_at = coalesce(held_at, excluded.held_at)`,
      )
      .bind(to, now.toISOString()),
    db.prepare('SELECT held_at, cursor, finished_at FROM shard_grows WHERE to_count = ?1').bind(to),
  ])
  const grow = row?.results[0]
  if (grow?.finished_at) return { done: true }
  const since = (now.getTime() - Date.parse(grow?.held_at ?? now.toISOString())) / 1000
  if (since < GROW_SETTLE_SECONDS) {
    const wait = Math.ceil(GROW_SETTLE_SECONDS - since)
    throw new ApiError(
      'CONFLICT',
      `the hold was first seen ${Math.floor(since)} s ago: an invocation from before it may still be writing; the grow starts in ${wait} s`,
      undefined,
      { retryAfter: wait },
    )
  }
  return { stored: grow?.cursor ?? null }
}

const where = (cursor: GrowCursor | null) =>
  cursor === null ? null : cursor.phase === 'finish' ? 'finish' : `shard ${cursor.shard}: ${cursor.phase}`

/** `/v1/shards`: growing the D1 shards. */
export const shards = createRouter().openapi(grow, async (c) => {
  const request = c.req.valid('json')
  const config = configOf(c.env)
  const from = config.DB_SHARDS
  if (config.DB_SHARDS_GROWING_TO === 0 || request.to !== config.DB_SHARDS_GROWING_TO) {
    throw new ApiError(
      'CONFLICT',
      `to is ${request.to}, but DB_SHARDS_GROWING_TO is ${config.DB_SHARDS_GROWING_TO}: set it to twice DB_SHARDS (${2 * from}) and deploy, so that nothing else writes while rows move`,
    )
  }
  const now = new Date()
  const state = await begin(c.env.DB, request.to, now)
  if ('done' in state) return c.json({ cursor: null, at: null, copied: {} }, 200)
  if (state.stored !== null && request.cursor !== state.stored) {
    return c.json({ cursor: state.stored, at: where(decode(state.stored, from)), copied: {} }, 200)
  }
  const cursor = state.stored === null ? null : decode(state.stored, from)
  const step = await growStep(c.env, from, cursor, request.limit)
  // The trail records the grow's start and its end (the hand-over of the counts).
  if (cursor === null || step.cursor === null) {
    await auditChange(
      c.env.DB,
      c.get('operator'),
      {
        action: cursor === null ? 'shards.grow-start' : 'shards.grow-finish',
        target: null,
        parameters: { from, to: request.to },
        affected: 1,
      },
      now.toISOString(),
    ).run()
  }
  const next = step.cursor === null ? null : toOpaque(step.cursor)
  // Where the grow is, for a command line that starts again without a cursor.
  if (next !== null) {
    await c.env.DB.prepare('UPDATE shard_grows SET cursor = ?2 WHERE to_count = ?1').bind(request.to, next).run()
  }
  return c.json({ cursor: next, at: where(step.cursor), copied: step.copied }, 200)
})
