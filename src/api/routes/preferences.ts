import { createRoute, z } from '@hono/zod-openapi'
import { Id } from '../../contracts/fields.ts'
import { ApiError, type FieldIssue } from '../../errors.ts'
import { kindOf, kinds } from '../../events/registry.ts'
import { preferencesOf, upsertPreference } from '../../preferences/store.ts'
import { runAudited } from '../audited.ts'
import { ADMIN_ERRORS, ADMIN_SECURITY, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'

const Channel = z.enum(['email'])

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
      }),
    ),
    transactional: z.array(z.string()).openapi({ description: 'kinds that are always sent' }),
  })
  .openapi('Preferences')

const UserParam = z.object({ userId: Id.openapi({ param: { name: 'userId', in: 'path' } }) })

const get = createRoute({
  method: 'get',
  path: '/{userId}',
  summary: 'A recipient’s choices: every optional kind and channel, with what is in effect',
  security: ADMIN_SECURITY,
  request: { params: UserParam },
  responses: { 200: json(PreferencesSchema, 'The preferences'), ...errors(400, ...ADMIN_ERRORS) },
})

const put = createRoute({
  method: 'put',
  path: '/{userId}',
  summary: 'Set a recipient’s choices for the kinds and channels given (others stay as they are)',
  description: 'Only optional kinds can be turned off; a transactional kind is refused (400), it is always sent.',
  security: ADMIN_SECURITY,
  request: {
    params: UserParam,
    body: jsonBody(
      z.object({
        preferences: z
          .array(z.object({ kind: z.string().min(1).max(100), channel: Channel, enabled: z.boolean() }))
          .min(1)
          .max(50),
      }),
    ),
  },
  responses: { 200: json(PreferencesSchema, 'Saved'), ...errors(...BODY_ERRORS, ...ADMIN_ERRORS) },
})

/** Every optional kind × its channels, with the stored choice or the default (send). */
async function preferencesView(db: D1Database, userId: string): Promise<z.infer<typeof PreferencesSchema>> {
  const stored = await preferencesOf(db, userId)
  const optional = kinds().filter((entry) => entry.kind.category === 'optional')
  const preferences = optional.flatMap(({ kind }) =>
    (kind.channels ?? ['email']).map((channel) => {
      const choice = stored.find((row) => row.kind === kind.name && row.channel === channel)
      return {
        kind: kind.name,
        channel,
        enabled: choice?.enabled ?? true,
        source: choice?.source ?? null,
        updatedAt: choice?.updatedAt ?? null,
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
    return c.json(await preferencesView(c.env.DB, userId), 200)
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
      }
    })
    if (issues.length > 0) throw new ApiError('INVALID_REQUEST', 'these kinds cannot be turned off', issues)
    const now = new Date().toISOString()
    await runAudited(
      c,
      body.preferences.map((choice) => upsertPreference(c.env.DB, userId, choice, 'api', now)),
      {
        action: 'preferences.put',
        target: userId,
        parameters: { preferences: body.preferences },
        affected: body.preferences.length,
      },
    )
    return c.json(await preferencesView(c.env.DB, userId), 200)
  })
