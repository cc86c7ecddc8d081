import { z } from '@hono/zod-openapi'
import { ApiError } from '../../errors.ts'
import type { Urgency } from '../../events/define.ts'
import { kindNames, kindOf } from '../../events/registry.ts'
import { CHANNELS } from '../../notifications/channels.ts'
import { runAudited } from '../audited.ts'
import { ADMIN_ERRORS, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const URGENCIES = ['low', 'normal', 'high'] as const satisfies readonly Urgency[]

const KindSchema = z.enum(kindNames() as [string, ...string[]])
const Key = z.object({
  kind: KindSchema.openapi({ param: { name: 'kind', in: 'path' } }),
  channel: z.enum(CHANNELS).openapi({ param: { name: 'channel', in: 'path' } }),
})

const Policy = z
  .object({
    kind: z.string(),
    urgency: z.enum(URGENCIES),
    channels: z
      .array(z.enum(CHANNELS))
      .openapi({ description: 'the channels an event of this kind and urgency takes' }),
    stored: z.boolean().openapi({
      description: "whether stored policies decide it; otherwise the kind's event-type module does (its `channels`)",
    }),
  })
  .openapi('ChannelPolicy')

const list = operatorRoute('viewer', {
  method: 'get',
  path: '/',
  summary: 'The channels each kind takes, by urgency',
  description:
    "For every kind and urgency: the channels its notifications go to — the stored policies when there are any for the pair, else the kind's own default.",
  responses: { 200: json(z.object({ items: z.array(Policy) }), 'Every kind and urgency'), ...errors(...ADMIN_ERRORS) },
})

const put = operatorRoute('admin', {
  method: 'put',
  path: '/{kind}/{channel}',
  summary: 'Turn a channel of a kind on or off',
  description:
    "Turns the channel on or off for the kind at the given urgencies (all three by default). A pair that had no stored policy first takes its kind's default channels as stored ones, so that turning one channel on never turns the others off. The in-app channel needs the kind's in-app templates.",
  request: {
    params: Key,
    body: jsonBody(
      z
        .object({
          enabled: z.boolean(),
          urgencies: z
            .array(z.enum(URGENCIES))
            .min(1)
            .max(3)
            .default([...URGENCIES]),
        })
        .strict(),
    ),
  },
  responses: {
    200: json(z.object({ items: z.array(Policy) }), "The kind's policies after the change"),
    ...errors(...BODY_ERRORS, ...ADMIN_ERRORS),
  },
})

type Row = { kind: string; urgency: Urgency; channel: (typeof CHANNELS)[number]; enabled: number }

/** The channels of each kind and urgency, as materialize decides them (src/materialize/plan-event.ts). */
async function policies(db: D1Database, only?: string): Promise<z.infer<typeof Policy>[]> {
  const { results } = await db
    .prepare('SELECT kind, urgency, channel, enabled FROM channel_policies ORDER BY kind, urgency, channel')
    .all<Row>()
  return (only === undefined ? kindNames() : [only]).flatMap((kind) =>
    URGENCIES.map((urgency) => {
      const stored = results.filter((row) => row.kind === kind && row.urgency === urgency)
      const channels =
        stored.length > 0
          ? stored.filter((row) => row.enabled === 1).map((row) => row.channel)
          : ((kindOf(kind)?.channels ?? ['email']) as Row['channel'][])
      return { kind, urgency, channels, stored: stored.length > 0 }
    }),
  )
}

/** `/v1/channel-policies`: which channels each kind takes. */
export const channelPolicies = createRouter()
  .openapi(list, async (c) => c.json({ items: await policies(c.env.DB) }, 200))
  .openapi(put, async (c) => {
    const { kind, channel } = c.req.valid('param')
    const { enabled, urgencies } = c.req.valid('json')
    if (channel === 'in-app' && enabled && kindOf(kind)?.inAppTemplates === undefined) {
      throw new ApiError('INVALID_REQUEST', `${kind} has no in-app templates: its in-app channel cannot be turned on`, [
        { field: 'channel', message: 'the kind declares no inAppTemplates' },
      ])
    }
    const defaults = JSON.stringify(kindOf(kind)?.channels ?? ['email'])
    // A pair without stored policies follows its kind's default: those channels are stored first, enabled, so
    // that the change below turns one channel alone on or off. Storing them changes nothing the pipeline
    // does, but from then on the pair no longer follows the code's default: the audit row says how many.
    const pinned = await c.env.DB.prepare(
      `INSERT INTO channel_policies (kind, urgency, channel, enabled)
       SELECT ?1, u.value, d.value, 1 FROM json_each(?2) AS u, json_each(?3) AS d
       WHERE NOT EXISTS (SELECT 1 FROM channel_policies AS p WHERE p.kind = ?1 AND p.urgency = u.value)
       ON CONFLICT DO NOTHING`,
    )
      .bind(kind, JSON.stringify(urgencies), defaults)
      .run()
    const stored = pinned.meta.changes
    await runAudited(
      c,
      [
        c.env.DB.prepare(
          `INSERT INTO channel_policies (kind, urgency, channel, enabled)
           SELECT ?1, u.value, ?2, ?3 FROM json_each(?4) AS u WHERE true
           ON CONFLICT (kind, urgency, channel) DO UPDATE SET enabled = excluded.enabled
           WHERE channel_policies.enabled <> excluded.enabled`,
        ).bind(kind, channel, enabled ? 1 : 0, JSON.stringify(urgencies)),
      ],
      {
        action: 'channel-policy.save',
        target: `${kind}/${channel}`,
        parameters: { enabled, urgencies, defaultsStored: stored },
        // Rows the change made; when only the defaults were stored, those.
        ...(stored > 0 ? { affected: stored } : {}),
      },
    )
    return c.json({ items: await policies(c.env.DB, kind) }, 200)
  })
