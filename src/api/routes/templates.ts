import { createRoute, z } from '@hono/zod-openapi'
import { Locale } from '../../contracts/fields.ts'
import { ApiError, type FieldIssue } from '../../errors.ts'
import { KINDS, type Kind } from '../../materialize/kinds.ts'
import { EXAMPLE_MODELS } from '../../templates/examples.ts'
import { parseTemplate, render, type TemplateSource } from '../../templates/render.ts'
import { activeTemplate, saveTemplate } from '../../templates/store.ts'
import { ADMIN_ERRORS, ADMIN_SECURITY, createRouter, errors, json } from '../openapi.ts'

const KindSchema = z.enum(KINDS)
const Key = z.object({
  kind: KindSchema.openapi({ param: { name: 'kind', in: 'path' } }),
  locale: Locale.openapi({ param: { name: 'locale', in: 'path' }, example: 'ru' }),
  channel: z.enum(['email']).openapi({ param: { name: 'channel', in: 'path' } }),
})
const Parts = z.object({
  subject: z.string().min(1).max(1000),
  textBody: z.string().min(1).max(100_000),
  htmlBody: z.string().min(1).max(200_000),
})
const Template = Parts.extend({
  kind: KindSchema,
  locale: z.string(),
  channel: z.string(),
  version: z.number(),
  createdAt: z.string(),
}).openapi('Template')
const Rendered = z.object({ subject: z.string(), text: z.string(), html: z.string() }).openapi('RenderedTemplate')

const get = createRoute({
  method: 'get',
  path: '/{kind}/{locale}/{channel}',
  summary: 'The active template for (kind, locale, channel)',
  security: ADMIN_SECURITY,
  request: { params: Key },
  responses: { 200: json(Template, 'The active version'), ...errors(400, 404, ...ADMIN_ERRORS) },
})

const put = createRoute({
  method: 'put',
  path: '/{kind}/{locale}/{channel}',
  summary: 'Save a new active version',
  description: "Rejects Liquid syntax errors, and renders the kind's example payload before saving.",
  security: ADMIN_SECURITY,
  request: { params: Key, body: { content: { 'application/json': { schema: Parts } } } },
  responses: {
    200: json(Template.extend({ preview: Rendered }), 'Saved and active'),
    ...errors(400, 409, ...ADMIN_ERRORS),
  },
})

const preview = createRoute({
  method: 'post',
  path: '/preview',
  summary: 'Render a template without saving it',
  description:
    "Renders the given parts, or else the active template of (kind, locale, channel), with the given model or the kind's example payload.",
  security: ADMIN_SECURITY,
  request: {
    body: {
      content: {
        'application/json': {
          schema: Parts.partial().extend({
            kind: KindSchema,
            locale: Locale.default('ru'),
            channel: z.enum(['email']).default('email'),
            model: z.record(z.string(), z.unknown()).optional(),
          }),
        },
      },
    },
  },
  responses: { 200: json(Rendered, 'Rendered'), ...errors(400, 404, ...ADMIN_ERRORS) },
})

/** Parses and renders, or throws INVALID_REQUEST naming the part and LiquidJS's line and column. */
function tryRender(source: TemplateSource, model: Record<string, unknown>) {
  const issues: FieldIssue[] = []
  for (const field of ['subject', 'textBody', 'htmlBody'] as const) {
    try {
      parseTemplate({ subject: 'x', textBody: 'x', htmlBody: 'x', [field]: source[field] })
    } catch (error) {
      issues.push({ field, message: `Liquid syntax error: ${(error as Error).message}` })
    }
  }
  if (issues.length > 0) throw new ApiError('INVALID_REQUEST', 'the template does not parse', issues)
  try {
    // A draft is not a saved version: never cached.
    return render(source, model, source.locale, { cache: false })
  } catch (error) {
    throw new ApiError('INVALID_REQUEST', 'the template does not render', [
      { field: 'template', message: `render error: ${(error as Error).message}` },
    ])
  }
}

/** `/v1/templates`: the LiquidJS templates in D1. */
export const templates = createRouter()
  .openapi(get, async (c) => {
    const { kind, locale, channel } = c.req.valid('param')
    const template = await activeTemplate(c.env.DB, kind, locale, channel)
    if (!template) throw new ApiError('NOT_FOUND', `no active template for (${kind}, ${locale}, ${channel})`)
    return c.json({ ...template, kind: template.kind as Kind }, 200)
  })
  .openapi(put, async (c) => {
    const { kind, locale, channel } = c.req.valid('param')
    const parts = c.req.valid('json')
    const preview = tryRender({ kind, locale, channel, version: 0, ...parts }, EXAMPLE_MODELS[kind])
    const now = new Date().toISOString()
    let version: number
    try {
      version = await saveTemplate(c.env.DB, { kind, locale, channel, ...parts }, now)
    } catch (error) {
      if (/UNIQUE|constraint/i.test((error as Error).message)) {
        throw new ApiError('CONFLICT', 'another version was saved at the same moment; send it again')
      }
      throw error
    }
    return c.json({ kind, locale, channel, version, createdAt: now, ...parts, preview }, 200)
  })
  .openapi(preview, async (c) => {
    const { kind, locale, channel, model, ...parts } = c.req.valid('json')
    let source: TemplateSource
    if (parts.subject !== undefined && parts.textBody !== undefined && parts.htmlBody !== undefined) {
      source = {
        kind,
        locale,
        channel,
        version: 0,
        subject: parts.subject,
        textBody: parts.textBody,
        htmlBody: parts.htmlBody,
      }
    } else {
      const active = await activeTemplate(c.env.DB, kind, locale, channel)
      if (!active) throw new ApiError('NOT_FOUND', `no active template for (${kind}, ${locale}, ${channel})`)
      source = { ...active, ...parts }
    }
    return c.json(tryRender(source, model ?? EXAMPLE_MODELS[kind]), 200)
  })
