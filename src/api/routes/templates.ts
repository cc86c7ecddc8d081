import { z } from '@hono/zod-openapi'
import { auditChange } from '../../audit/audit-store.ts'
import type { TemplateLimits } from '../../config.ts'
import { configOf } from '../../config.ts'
import { Locale } from '../../contracts/fields.ts'
import { ApiError, type FieldIssue } from '../../errors.ts'
import { templateKeys } from '../../events/registry.ts'
import { exampleModelOf } from '../../templates/examples.ts'
import {
  type Parsed,
  PREVIEW_SHARE,
  parsePart,
  previewLimits,
  render,
  TemplateError,
  type TemplateSource,
} from '../../templates/sandbox.ts'
import { saveTemplate, templateInEffect } from '../../templates/template-store.ts'
import { ADMIN_ERRORS, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { oneRenderAtATime } from '../render-turns.ts'
import { operatorRoute } from '../roles.ts'

// The kinds the registry declares when the Worker starts.
// A kind's name, or a digest's key (`ResponseCreated.digest`).
const KindSchema = z.enum(templateKeys().map((entry) => entry.key) as [string, ...string[]])
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
  version: z.number().openapi({ description: "0 is the kind's built-in default (nothing stored yet)" }),
  createdAt: z.string().nullable().openapi({ description: 'null for the built-in default' }),
}).openapi('Template')
const Rendered = z.object({ subject: z.string(), text: z.string(), html: z.string() }).openapi('RenderedTemplate')

const get = operatorRoute('viewer', {
  method: 'get',
  path: '/{kind}/{locale}/{channel}',
  summary: 'The template in effect for (kind, locale, channel): the active stored version, else the built-in default',
  request: { params: Key },
  responses: { 200: json(Template, 'The active version'), ...errors(400, 404, ...ADMIN_ERRORS) },
})

const RENDER_LIMITS_NOTE = `Renders within 1/${PREVIEW_SHARE} of the pipeline's TEMPLATE_RENDER_LIMIT_MS, TEMPLATE_RENDER_STEPS and TEMPLATE_MEMORY_LIMIT, one render at a time per operator (429 TOO_MANY_PREVIEWS while the last is running).`

const put = operatorRoute(
  'admin',
  {
    method: 'put',
    path: '/{kind}/{locale}/{channel}',
    summary: 'Save a new active version',
    description: `Rejects Liquid syntax errors, and renders the kind's example payload before saving. ${RENDER_LIMITS_NOTE}`,
    request: { params: Key, body: jsonBody(Parts) },
    responses: {
      200: json(Template.extend({ preview: Rendered }), 'Saved and active'),
      ...errors(...BODY_ERRORS, 409, ...ADMIN_ERRORS),
    },
  },
  {},
  [oneRenderAtATime],
)

// A POST that changes nothing: a viewer may preview.
const preview = operatorRoute(
  'viewer',
  {
    method: 'post',
    path: '/preview',
    summary: 'Render a template without saving it',
    description: `Renders the given parts, or else the active template of (kind, locale, channel), with the given model or the kind's example payload. ${RENDER_LIMITS_NOTE}`,
    request: {
      body: jsonBody(
        Parts.partial().extend({
          kind: KindSchema,
          locale: Locale.default('ru'),
          channel: z.enum(['email']).default('email'),
          model: z.record(z.string(), z.unknown()).optional(),
        }),
      ),
    },
    responses: { 200: json(Rendered, 'Rendered'), ...errors(...BODY_ERRORS, 404, ...ADMIN_ERRORS) },
  },
  {},
  [oneRenderAtATime],
)

/**
 * Parses and renders within a preview's share of the configured limits
 * (`previewLimits`), or throws INVALID_REQUEST naming each part that does not
 * parse (with LiquidJS's line and column), or the part that fails to render
 * or breaks a limit (and which limit).
 */
function tryRender(source: TemplateSource, model: Record<string, unknown>, pipeline: TemplateLimits) {
  const limits = previewLimits(pipeline)
  const issues: FieldIssue[] = []
  const parsed: Partial<Parsed> = {}
  for (const field of ['subject', 'textBody', 'htmlBody'] as const) {
    try {
      parsed[field] = parsePart(field, source[field], limits, source.channel)
    } catch (error) {
      const message = (error as Error).message
      issues.push({ field, message: (error as TemplateError).limit ? message : `Liquid syntax error: ${message}` })
    }
  }
  if (issues.length > 0) throw new ApiError('INVALID_REQUEST', 'the template does not parse', issues)
  try {
    // A draft is not a saved version: never cached, and parsed once.
    return render(source, model, source.locale, limits, { cache: false, parsed: parsed as Parsed })
  } catch (error) {
    if (!(error instanceof TemplateError)) throw error
    const broke = error.limit ? `breaks the ${error.limit} limit` : 'does not render'
    throw new ApiError('INVALID_REQUEST', `the template ${broke}`, [
      { field: error.part, message: error.limit ? error.message : `render error: ${error.message}` },
    ])
  }
}

/** `/v1/templates`: the LiquidJS templates in D1. */
export const templates = createRouter()
  .openapi(get, async (c) => {
    const { kind, locale, channel } = c.req.valid('param')
    const template = await templateInEffect(c.env.DB, kind, locale, channel)
    if (!template) throw new ApiError('NOT_FOUND', `no active template for (${kind}, ${locale}, ${channel})`)
    return c.json(template, 200)
  })
  .openapi(put, async (c) => {
    const { kind, locale, channel } = c.req.valid('param')
    const parts = c.req.valid('json')
    const preview = tryRender(
      { kind, locale, channel, version: 0, ...parts },
      exampleModelOf(kind) ?? {},
      configOf(c.env).templateLimits,
    )
    const now = new Date().toISOString()
    let version: number
    try {
      const target = `${kind}/${locale}/${channel}`
      const audit = (saved: number) =>
        auditChange(
          c.env.DB,
          c.get('operator'),
          { action: 'template.save', target, parameters: { version: saved } },
          now,
        )
      version = await saveTemplate(c.env.DB, { kind, locale, channel, ...parts }, now, audit)
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
      const active = await templateInEffect(c.env.DB, kind, locale, channel)
      if (!active) throw new ApiError('NOT_FOUND', `no active template for (${kind}, ${locale}, ${channel})`)
      source = { ...active, ...parts }
    }
    return c.json(tryRender(source, model ?? exampleModelOf(kind) ?? {}, configOf(c.env).templateLimits), 200)
  })
