import { createRoute, z } from '@hono/zod-openapi'
import { exposition } from '../../metrics/prom.ts'
import { ADMIN_ERRORS, ADMIN_SECURITY, createRouter, errors } from '../openapi.ts'

const scrape = createRoute({
  method: 'get',
  path: '/',
  summary: 'Prometheus metrics',
  description:
    'From counters and gauges kept in D1 and updated in the same batches as the data (never a scan of the data tables).',
  security: ADMIN_SECURITY,
  responses: {
    200: { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: z.string() } } },
    ...errors(...ADMIN_ERRORS),
  },
})

/** `/metrics`. */
export const metrics = createRouter().openapi(scrape, async (c) => {
  const db = c.env.DB
  const [counters, gauges] = await db.batch<{ name: string; labels: string; value: number }>([
    db.prepare('SELECT name, labels, value FROM counters'),
    db.prepare('SELECT name, labels, value FROM gauges'),
  ])
  const { text, contentType } = await exposition(counters?.results ?? [], gauges?.results ?? [])
  return c.text(text, 200, { 'content-type': contentType })
})
