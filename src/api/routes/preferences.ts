import { z } from '@hono/zod-openapi'
import { Id } from '../../contracts/fields.ts'
import { shardDbOfUser } from '../../d1/shards.ts'
import { ApiError, type FieldIssue } from '../../errors.ts'
import type { KindDefinition } from '../../events/define.ts'
import { deliveryModeOf, deliveryOf, kindOf, kinds } from '../../events/registry.ts'
import { CHANNELS } from '../../notifications/channels.ts'
import { CHOICES, choiceInEffect, modeRefusal, modesOf } from '../../preferences/choice.ts'
import { preferencesOf, upsertPreference } from '../../preferences/preference-store.ts'
import { runAudited } from '../audited.ts'
import { ADMIN_ERRORS, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const Channel = z.enum(CHANNELS)

const Mode = z.enum(['instant', 'digest']).openapi('DeliveryMode', {
  description: '`instant`: one email per notification; `digest`: one email for all of a digest’s',
})

const DigestScheduleSchema = z
  .union([
    z.object({ window: z.object({ minutes: z.number().int() }) }),
    z.object({ daily: z.object({ at: z.string().openapi({ description: 'HH:MM in the recipient’s time zone' }) }) }),
  ])
  .openapi('DigestSchedule', {
    description: '`window`: closes that many minutes after its first notification; `daily`: at a local time',
  })

const PreferencesSchema = z
  .object({
    userId: z.string(),
    preferences: z.array(
      z.object({
        kind: z.string(),
        channel: z.string(),
        enabled: z.boolean(),
        source: z.enum(['api', 'unsubscribe']).nullable().openapi({ description: 'null: never chosen (the default)' }),
        updatedAt: z.string().nullable(),
        mode: Mode.nullable().openapi({ description: 'the recipient’s choice of how it comes; null: `defaultMode`' }),
        defaultMode: Mode.openapi({ description: 'how it comes unless the recipient chose' }),
        modes: z.array(Mode).openapi({
          description:
            'the modes it can come in on this channel (`digest` where the kind has one); off is `enabled: false`',
        }),
        inEffect: z.enum(CHOICES).openapi({ description: 'what planning does now: `off`, or the mode it comes in' }),
        digest: DigestScheduleSchema.nullable().openapi({ description: 'when its digest closes; null: no digest' }),
      }),
    ),
    transactional: z.array(z.string()).openapi({ description: 'kinds that are always sent' }),
  })
  .openapi('Preferences')

const UserParam = z.object({ userId: Id.openapi({ param: { name: 'userId', in: 'path' } }) })

const get = operatorRoute('viewer', {
  method: 'get',
  path: '/{userId}',
  summary: 'A recipient’s choices: every optional kind and channel, with what is in effect',
  request: { params: UserParam },
  responses: { 200: json(PreferencesSchema, 'The preferences'), ...errors(400, ...ADMIN_ERRORS) },
})

const put = operatorRoute('admin', {
  method: 'put',
  path: '/{userId}',
  summary: 'Set a recipient’s choices for the kinds and channels given (others stay as they are)',
  description:
    'Only optional kinds can be turned off or given a mode; a transactional kind is refused (400), it is always sent. ' +
    '`mode` says how an enabled kind comes: omitted, the stored mode stays; null, back to the kind’s default; ' +
    '`digest` is refused (400) for a kind without a digest on that channel.',
  request: {
    params: UserParam,
    body: jsonBody(
      z.object({
        preferences: z
          .array(
            z.object({
              kind: z.string().min(1).max(100),
              channel: Channel,
              enabled: z.boolean(),
              mode: Mode.nullable().optional(),
            }),
          )
          .min(1)
          .max(50),
      }),
    ),
  },
  responses: { 200: json(PreferencesSchema, 'Saved'), ...errors(...BODY_ERRORS, ...ADMIN_ERRORS) },
})

/** The channels a recipient may choose on for a kind: its own, and in-app where it has an in-app item. */
function channelsOf(kind: KindDefinition): string[] {
  const own = [...(kind.channels ?? ['email'])]
  return kind.inAppTemplates && !own.includes('in-app') ? [...own, 'in-app'] : own
}

/** Every optional kind × its channels, with the stored choice or the default (send, in the kind's default mode). */
async function preferencesView(db: D1Database, userId: string): Promise<z.infer<typeof PreferencesSchema>> {
  const stored = await preferencesOf(db, userId)
  const optional = kinds().filter((entry) => entry.kind.category === 'optional')
  const preferences = optional.flatMap(({ kind }) =>
    channelsOf(kind).map((channel) => {
      const choice = stored.find((row) => row.kind === kind.name && row.channel === channel)
      return {
        kind: kind.name,
        channel,
        enabled: choice?.enabled ?? true,
        source: choice?.source ?? null,
        updatedAt: choice?.updatedAt ?? null,
        mode: choice?.mode ?? null,
        defaultMode: deliveryModeOf(kind.name, channel, undefined),
        modes: modesOf(kind.name, channel),
        inEffect: choiceInEffect(kind.name, channel, choice),
        digest: deliveryOf(kind.name, channel).digest ?? null,
      }
    }),
  )
  const transactional = kinds()
    .filter((entry) => entry.kind.category === 'transactional')
    .map((entry) => entry.kind.name)
  return { userId, preferences, transactional }
}

/** `/v1/preferences`: what each recipient wants to receive. */
export const preferences = createRouter()
  .openapi(get, async (c) => {
    const { userId } = c.req.valid('param')
    return c.json(await preferencesView(await shardDbOfUser(c.env, userId), userId), 200)
  })
  .openapi(put, async (c) => {
    const { userId } = c.req.valid('param')
    const body = c.req.valid('json')
    const issues: FieldIssue[] = []
    body.preferences.forEach((choice, index) => {
      const kind = kindOf(choice.kind)
      if (!kind) issues.push({ field: `preferences[${index}].kind`, message: `no kind ${choice.kind}` })
      else if (kind.category !== 'optional') {
        issues.push({ field: `preferences[${index}].kind`, message: `${choice.kind} is transactional: always sent` })
      } else {
        const refused = choice.mode ? modeRefusal(choice.kind, choice.channel, choice.mode) : undefined
        if (refused) issues.push({ field: `preferences[${index}].mode`, message: refused })
      }
    })
    if (issues.length > 0) throw new ApiError('INVALID_REQUEST', 'these choices cannot be made', issues)
    const now = new Date().toISOString()
    // In the recipient's D1 shard (src/d1/shards.ts).
    const db = await shardDbOfUser(c.env, userId)
    await runAudited(
      c,
      body.preferences.map((choice) => upsertPreference(db, userId, choice, 'api', now)),
      {
        action: 'preferences.put',
        target: userId,
        parameters: { preferences: body.preferences },
        affected: body.preferences.length,
      },
      db,
    )
    return c.json(await preferencesView(db, userId), 200)
  })
