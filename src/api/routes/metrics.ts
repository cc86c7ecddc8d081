import { z } from '@hono/zod-openapi'
import { configOf } from '../../config.ts'
import { rowsEverywhere, sumRows } from '../../d1/shards.ts'
import { ApiError } from '../../errors.ts'
import { firstPauses, PROVIDER_STATES, providersOf } from '../../health/providers.ts'
import { readPauses, sentLastHour } from '../../health/transport-reads.ts'
import { canonicalLabels, GAUGES } from '../../metrics/counters.ts'
import { exposition } from '../../metrics/prom.ts'
import { ADMIN_ERRORS, createRouter, errors } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const scrape = operatorRoute('viewer', {
  method: 'get',
  path: '/',
  summary: 'Prometheus metrics',
  description:
    "From counters and gauges kept in D1 and updated in the same batches as the data (never a scan of the data tables); each email transport's pause and state from `transport_pauses`, and its sends of the last hour from the index of sent emails (the hour's entries only).",
  responses: {
    200: { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: z.string() } } },
    ...errors(503, ...ADMIN_ERRORS),
  },
})

type Row = { name: string; labels: string; value: number }

/**
 * The gauges of the email transports, from every shard's pauses (a pause in
 * any shard is the transport's) and sends: `notify_transport_paused` for
 * each configured transport (0 with an empty code when usable) and each
 * pause of another, `notify_transport_state` for each configured one (1 for
 * its state, 0 for the others), and `notify_transport_sent_last_hour` for
 * each configured one and any other that sent in the hour.
 */
function transportGauges(
  transports: readonly string[],
  pauses: readonly Record<string, unknown>[],
  sent: readonly Record<string, unknown>[],
): Row[] {
  const row = (name: string, labels: Record<string, string>, value: number): Row => ({
    name,
    labels: canonicalLabels(labels),
    value,
  })
  const paused = new Set(pauses.map((pause) => String(pause.transport)))
  const sentBy = new Map(sumRows(sent, ['transport']).map((found) => [String(found.transport), Number(found.sent)]))
  return [
    ...transports
      .filter((transport) => !paused.has(transport))
      .map((transport) => row(GAUGES.transportPaused, { transport, code: '' }, 0)),
    ...pauses.map((pause) =>
      row(GAUGES.transportPaused, { transport: String(pause.transport), code: String(pause.code) }, 1),
    ),
    ...providersOf(transports, firstPauses(pauses)).flatMap(({ transport, state }) =>
      PROVIDER_STATES.map((each) => row(GAUGES.transportState, { transport, state: each }, each === state ? 1 : 0)),
    ),
    ...[...new Set([...transports, ...sentBy.keys()])].map((transport) =>
      row(GAUGES.transportSentLastHour, { transport }, sentBy.get(transport) ?? 0),
    ),
  ]
}

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
  // With D1 shards, every shard's: counters summed (one row per name and labels), and of a gauge's rows
  // the largest (the fullest database, the oldest lag). The transports' pauses are read from their own
  // table, so every configured transport has its values, and their sends from the hour's sent emails.
  const now = new Date()
  const [counters = [], gauges = [], pauses = [], sent = []] = await rowsEverywhere(c.env, (db) => [
    db.prepare('SELECT name, labels, value FROM counters'),
    db.prepare('SELECT name, labels, value FROM gauges'),
    readPauses(db),
    sentLastHour(db, now),
  ])
  const { text, contentType } = await exposition(sumRows(counters as Row[], ['name', 'labels']), [
    ...(gauges as Row[]),
    ...transportGauges(config.transports, pauses, sent),
  ])
  return c.text(text, 200, { 'content-type': contentType })
})
