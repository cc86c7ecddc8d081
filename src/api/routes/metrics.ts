import { z } from '@hono/zod-openapi'
import { configOf } from '../../config.ts'
import { rowsEverywhere, sumRows } from '../../d1/shards.ts'
import { ApiError } from '../../errors.ts'
import { GAUGES } from '../../metrics/counters.ts'
import { exposition } from '../../metrics/prom.ts'
import { ADMIN_ERRORS, createRouter, errors } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const scrape = operatorRoute('viewer', {
  method: 'get',
  path: '/',
  summary: 'Prometheus metrics',
  description:
    'From counters and gauges kept in D1 and updated in the same batches as the data (never a scan of the data tables).',
  responses: {
    200: { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: z.string() } } },
    ...errors(503, ...ADMIN_ERRORS),
  },
})

type Row = { name: string; labels: string; value: number }

/** `/metrics`. */
export const metrics = createRouter().openapi(scrape, async (c) => {
  const config = configOf(c.env)
  // While the shards grow, the sums would drop by what moved to the new shards (not yet counted) and
  // rise back after: a scraper would read two counter resets. A failed scrape is a gap instead.
  if (config.DB_SHARDS_GROWING_TO > 0) {
    throw new ApiError(
      'SHARDS_GROWING',
      'the D1 shards are growing: /metrics answers once the Worker runs with the new count',
      undefined,
      {
        retryAfter: 300,
      },
    )
  }
  // The pause is read from its own table: the configured transport always has a value, 0 when sending.
  const transport = config.EMAIL_TRANSPORT
  // With D1 shards, every shard's: counters summed (one row per name and labels), and of a gauge's rows
  // the largest (the fullest database, a pause in any shard, the oldest lag).
  const [counters = [], gauges = [], paused = []] = (await rowsEverywhere(c.env, (db) => [
    db.prepare('SELECT name, labels, value FROM counters'),
    db.prepare('SELECT name, labels, value FROM gauges'),
    db
      .prepare(
        `SELECT ?1 AS name, json_object('transport', ?2, 'code', coalesce(p.code, '')) AS labels,
                CASE WHEN p.transport IS NULL THEN 0 ELSE 1 END AS value
         FROM (SELECT 1) LEFT JOIN transport_pauses p ON p.transport = ?2
         UNION ALL
         SELECT ?1, json_object('transport', transport, 'code', code), 1 FROM transport_pauses WHERE transport <> ?2`,
      )
      .bind(GAUGES.transportPaused, transport),
  ])) as Row[][]
  const { text, contentType } = await exposition(sumRows(counters, ['name', 'labels']), [...gauges, ...paused])
  return c.text(text, 200, { 'content-type': contentType })
})
