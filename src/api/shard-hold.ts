import { createMiddleware } from 'hono/factory'
import { configOf } from '../config.ts'
import { ApiError } from '../errors.ts'
import { isRead } from './auth.ts'
import type { AppEnv } from './openapi.ts'

/** What a change is told to wait while the shards grow: a grow of a database of ~11 M emails a month takes a while. */
const RETRY_AFTER_SECONDS = 300

/**
 * What keeps working while the shards grow: ingest and webhooks only enqueue, the grow itself moves the
 * rows, an unsubscribe link writes to the recipient's shard of the new count (`shardDbOfUserToWrite`),
 * and an end user's inbox is a Durable Object, not D1.
 */
const GOES_ON = ['/v1/ingest', '/v1/webhooks/', '/v1/shards/grow', '/u/', '/v1/inbox']

/**
 * While the D1 shards grow (DB_SHARDS_GROWING_TO, src/shards/grow.ts), a change
 * an operator asks for — a preference, a suppression, an erasure, a
 * replay — would be written in the shard of the
 * old count, behind the move or into a row about to leave: it answers 503
 * `SHARDS_GROWING` instead, to be sent again once the Worker runs with the
 * new count. Reads go on (a recipient being moved may be missing for the
 * moment).
 */
export const holdWhileGrowing = createMiddleware<AppEnv>(async (c, next) => {
  if (isRead(c.req.method) || configOf(c.env).DB_SHARDS_GROWING_TO === 0) return next()
  const path = c.req.path
  if (GOES_ON.some((prefix) => path === prefix || path.startsWith(prefix))) return next()
  throw new ApiError(
    'SHARDS_GROWING',
    'the D1 shards are growing: changes wait until the Worker runs with the new count',
    undefined,
    { retryAfter: RETRY_AFTER_SECONDS },
  )
})
