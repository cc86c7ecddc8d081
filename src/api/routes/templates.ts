import { z } from '@hono/zod-openapi'
import { toFieldIssues } from '@notify-edge/contracts'
import { auditChange } from '../../audit/audit-store.ts'
import type { Operator } from '../../audit/operator.ts'
import type { TemplateLimits } from '../../config.ts'
import { configOf } from '../../config.ts'
import { Locale } from '../../contracts/fields.ts'
import { ApiError, type FieldIssue } from '../../errors.ts'
import type { InAppTemplateParts } from '../../events/define.ts'
import { templateKeys } from '../../events/registry.ts'
import { exampleModelOf } from '../../templates/examples.ts'
import { IN_APP_LINES, inAppItem, inAppSource, inAppTemplateOf } from '../../templates/in-app.ts'
import {
  type Parsed,
  type Part,
  PREVIEW_SHARE,
  parsePart,
  previewLimits,
  type Rendered as RenderedParts,
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
/** The channels a template is kept for: an email, or an in-app item (for a kind that has one). */
const ChannelSchema = z.enum(['email', 'in-app'])
type Channel = z.infer<typeof ChannelSchema>
const Key = z.object({
  kind: KindSchema.openapi({ param: { name: 'kind', in: 'path' } }),
  locale: Locale.openapi({ param: { name: 'locale', in: 'path' }, example: 'ru' }),
  channel: ChannelSchema.openapi({
    param: { name: 'channel', in: 'path' },
    description: '`in-app` only for a kind whose event type declares in-app templates',
  }),
})
const Parts = z.object({
  subject: z.string().min(1).max(1000),
  textBody: z.string().min(1).max(100_000),
  htmlBody: z.string().min(1).max(200_000),
})

/**
 * One line of an in-app template's third part (./in-app.ts keeps the link,
 * the action's label and its address a line each): a line break would move
 * the parts after it.
 */
const Line = (max: number) =>
  z
    .string()
    .max(max)
    .regex(/^[^\r\n]*$/, 'one line: no line break')
// Not a named schema of the document: a preview takes it partial.
const InAppParts = z.object({
  title: z.string().min(1).max(1000).openapi({ description: 'Liquid: the item’s title (cut to 200 characters)' }),
  body: z.string().max(100_000).openapi({ description: 'Liquid: the item’s body, plain text (cut to 2,000)' }),
  link: Line(10_000)
    .nullish()
    .openapi({ description: 'Liquid: the http(s) address a click on the item opens; empty or null for none' }),
  action: z
    .object({ label: Line(1000).min(1), url: Line(10_000).min(1) })
    .nullish()
    .openapi({ description: 'Liquid: one button beside the item, its label and its http(s) address' }),
})
type InAppBody = z.infer<typeof InAppParts>

const Template = Parts.extend({
  kind: KindSchema,
  locale: z.string(),
  channel: z.string(),
  version: z.number().openapi({ description: "0 is the kind's built-in default (nothing stored yet)" }),
  createdAt: z.string().nullable().openapi({ description: 'null for the built-in default' }),
}).openapi('Template')
const Rendered = z.object({ subject: z.string(), text: z.string(), html: z.string() }).openapi('RenderedTemplate')

/** An item's action as the API answers it: a button's label and address. */
const ActionView = z.object({ label: z.string(), url: z.string() })

/** An in-app item as a feed would show it: what was cut is cut, an address a feed would not take is left out. */
const InAppItem = z
  .object({
    title: z.string(),
    body: z.string(),
    link: z.string().nullable(),
    action: ActionView.nullable(),
  })
  .openapi('InAppItem')
const InAppTemplate = z
  .object({
    kind: KindSchema,
    locale: z.string(),
    channel: z.literal('in-app'),
    version: z.number().openapi({ description: "0 is the kind's built-in default (nothing stored yet)" }),
    createdAt: z.string().nullable().openapi({ description: 'null for the built-in default' }),
    title: z.string(),
    body: z.string(),
    link: z.string().nullable(),
    action: ActionView.nullable(),
  })
  .openapi('InAppTemplate')

const CHANNELS_NOTE =
  'An `email` template has a `subject`, a `textBody` and an `htmlBody`; an `in-app` one a `title`, a `body`, and optionally a `link` and an `action` (`label`, `url`), each Liquid.'

const get = operatorRoute('viewer', {
  method: 'get',
  path: '/{kind}/{locale}/{channel}',
  summary: 'The template in effect for (kind, locale, channel): the active stored version, else the built-in default',
  description: CHANNELS_NOTE,
  request: { params: Key },
  responses: {
    200: json(z.union([Template, InAppTemplate]), 'The active version'),
    ...errors(400, 404, ...ADMIN_ERRORS),
  },
})

const RENDER_LIMITS_NOTE = `Renders within 1/${PREVIEW_SHARE} of the pipeline's TEMPLATE_RENDER_LIMIT_MS, TEMPLATE_RENDER_STEPS and TEMPLATE_MEMORY_LIMIT, one render at a time per operator (429 TOO_MANY_PREVIEWS while the last is running).`

const put = operatorRoute(
  'admin',
  {
    method: 'put',
    path: '/{kind}/{locale}/{channel}',
    summary: 'Save a new active version',
    description: `${CHANNELS_NOTE} The body is the channel's: an in-app template for a kind without one is refused (400, the issue names \`channel\`). Rejects Liquid syntax errors, and renders the kind's example payload before saving; the answer's \`preview\` is the email, or the in-app item as a feed would show it. ${RENDER_LIMITS_NOTE}`,
    request: { params: Key, body: jsonBody(z.union([Parts, InAppParts])) },
    responses: {
      200: json(
        z.union([Template.extend({ preview: Rendered }), InAppTemplate.extend({ preview: InAppItem })]),
        'Saved and active',
      ),
      ...errors(...BODY_ERRORS, 409, ...ADMIN_ERRORS),
    },
  },
  {},
  [oneRenderAtATime],
)

const PreviewOptions = {
  kind: KindSchema,
  locale: Locale.default('ru'),
  model: z.record(z.string(), z.unknown()).optional(),
}

// A POST that changes nothing: a viewer may preview.
const preview = operatorRoute(
  'viewer',
  {
    method: 'post',
    path: '/preview',
    summary: 'Render a template without saving it',
    description: `Renders the given parts, or else the active template of (kind, locale, channel) with the parts given laid over it, with the given model or the kind's example payload. ${CHANNELS_NOTE} An in-app template answers the item as a feed would show it: its title and body cut, an address a feed would not take left out. ${RENDER_LIMITS_NOTE}`,
    request: {
      body: jsonBody(
        z.discriminatedUnion('channel', [
          Parts.partial().extend({ ...PreviewOptions, channel: z.literal('email').default('email') }),
          InAppParts.partial().extend({ ...PreviewOptions, channel: z.literal('in-app') }),
        ]),
      ),
    },
    responses: {
      200: json(z.union([Rendered, InAppItem]), 'Rendered'),
      ...errors(...BODY_ERRORS, 404, ...ADMIN_ERRORS),
    },
  },
  {},
  [oneRenderAtATime],
)

/** Whether a kind (or digest key) has an in-app item: its event type declares in-app templates. */
function hasInApp(kind: string): boolean {
  return templateKeys().some((entry) => entry.key === kind && entry.inApp !== undefined)
}

/** Refuses the in-app channel of a kind without an in-app item: nothing would ever render such a template. */
function refuseChannel(kind: string, channel: Channel): void {
  if (channel !== 'in-app' || hasInApp(kind)) return
  throw new ApiError('INVALID_REQUEST', `${kind} has no in-app item`, [
    { field: 'channel', message: `${kind} has no in-app templates (its event type declares none): only email` },
  ])
}

/** The body of a PUT as the channel of its path takes it (`schema`), or INVALID_REQUEST naming each field. */
function bodyOf<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body)
  if (!parsed.success) {
    throw new ApiError('INVALID_REQUEST', 'the request does not match its schema', toFieldIssues(parsed.error))
  }
  return parsed.data
}

/**
 * Why a PUT's body that fits neither channel's schema is refused: the issues
 * of its path's channel — `title` for an in-app template, `subject` for an
 * email — rather than a union's "invalid input" (or the channel, for a kind
 * without an in-app item).
 */
function refuseByChannel(kind: string | undefined, channel: string | undefined, body: unknown): void {
  const parsed = ChannelSchema.safeParse(channel)
  if (!parsed.success) return
  refuseChannel(kind ?? '', parsed.data)
  bodyOf(parsed.data === 'in-app' ? InAppParts : Parts, body)
}

/** An in-app template's parts as they are edited, from the API's body (null and empty are "none"). */
function inAppPartsOf(body: Partial<InAppBody> & Pick<InAppBody, 'title' | 'body'>): InAppTemplateParts {
  return {
    title: body.title,
    body: body.body,
    ...(body.link ? { link: body.link } : {}),
    ...(body.action ? { action: body.action } : {}),
  }
}

/** An in-app template as the API answers it: its parts in the words it is edited with, none as null. */
function inAppView(template: TemplateSource & { createdAt: string | null }): z.infer<typeof InAppTemplate> {
  const parts = inAppTemplateOf(template)
  return {
    kind: template.kind,
    locale: template.locale,
    channel: 'in-app',
    version: template.version,
    createdAt: template.createdAt,
    title: parts.title,
    body: parts.body,
    link: parts.link ?? null,
    action: parts.action ?? null,
  }
}

/** An issue of a part that does not parse: LiquidJS's words (with line and column), or the limit it broke. */
function parseIssue(field: string, error: unknown): FieldIssue {
  const message = (error as Error).message
  return { field, message: (error as TemplateError).limit ? message : `Liquid syntax error: ${message}` }
}

/** The refusal of a draft that parsed and failed to render, naming the field and the limit it broke. */
function renderRefusal(field: string, error: TemplateError): ApiError {
  const broke = error.limit ? `breaks the ${error.limit} limit` : 'does not render'
  return new ApiError('INVALID_REQUEST', `the template ${broke}`, [
    { field, message: error.limit ? error.message : `render error: ${error.message}` },
  ])
}

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
      issues.push(parseIssue(field, error))
    }
  }
  if (issues.length > 0) throw new ApiError('INVALID_REQUEST', 'the template does not parse', issues)
  try {
    // A draft is not a saved version: never cached, and parsed once.
    return render(source, model, source.locale, limits, { cache: false, parsed: parsed as Parsed })
  } catch (error) {
    if (!(error instanceof TemplateError)) throw error
    throw renderRefusal(error.part, error)
  }
}

/** The fields of an in-app template, each with the stored part it is (or is a line of) and its Liquid. */
function inAppFields(parts: InAppTemplateParts): { field: string; part: Part; text: string }[] {
  const lines = [parts.link ?? '', parts.action?.label ?? '', parts.action?.url ?? '']
  return [
    { field: 'title', part: 'subject', text: parts.title },
    { field: 'body', part: 'textBody', text: parts.body },
    ...IN_APP_LINES.map((field, index) => ({ field, part: 'htmlBody' as const, text: lines[index] ?? '' })),
  ]
}

/** What an in-app template's stored parts are called in errors: the words it is edited with. */
const IN_APP_NAMES: Record<Part, string> = { subject: 'title', textBody: 'body', htmlBody: 'link and action' }

/**
 * `tryRender` for an in-app template, its errors naming the fields an
 * operator edits — `title`, `body`, `link`, `action.label`, `action.url` —
 * not the parts it is stored in: each field is parsed alone first, so a
 * syntax error names its own field; a line of the third part that fails to
 * render is found by rendering each alone (only then, on the way out). The
 * render itself is the pipeline's, of the stored parts.
 */
function tryRenderInApp(
  kind: string,
  locale: string,
  parts: InAppTemplateParts,
  model: Record<string, unknown>,
  pipeline: TemplateLimits,
): RenderedParts {
  const limits = previewLimits(pipeline)
  const issues: FieldIssue[] = []
  const parsed: Partial<Parsed> = {}
  for (const { field, part, text } of inAppFields(parts)) {
    try {
      const nodes = parsePart(part, text, limits, 'in-app', field)
      // The title and the body are whole parts; the lines of the third are parsed together below.
      if (part !== 'htmlBody') parsed[part] = nodes
    } catch (error) {
      issues.push(parseIssue(field, error))
    }
  }
  if (issues.length > 0) throw new ApiError('INVALID_REQUEST', 'the template does not parse', issues)
  const source = inAppSource(kind, locale, 0, parts)
  try {
    // Each line parsed alone; together they may still pass a limit of one part.
    parsed.htmlBody = parsePart('htmlBody', source.htmlBody, limits, 'in-app', IN_APP_NAMES.htmlBody)
  } catch (error) {
    throw new ApiError('INVALID_REQUEST', 'the template does not parse', [parseIssue('link', error)])
  }
  try {
    return render(source, model, locale, limits, { cache: false, parsed: parsed as Parsed, names: IN_APP_NAMES })
  } catch (error) {
    if (!(error instanceof TemplateError)) throw error
    if (error.part !== 'htmlBody') throw renderRefusal(IN_APP_NAMES[error.part], error)
    throw lineRefusal(source, parts, model, limits) ?? renderRefusal('link', error)
  }
}

/**
 * The refusal of the first line of an in-app template's third part that
 * fails to render alone, named by its field; undefined when each renders
 * alone (together they broke a limit: the caller names them together).
 */
function lineRefusal(
  source: TemplateSource,
  parts: InAppTemplateParts,
  model: Record<string, unknown>,
  limits: TemplateLimits,
): ApiError | undefined {
  for (const { field, part, text } of inAppFields(parts)) {
    if (part !== 'htmlBody' || text === '') continue
    try {
      render({ ...source, subject: '', textBody: '', htmlBody: text }, model, source.locale, limits, {
        cache: false,
        names: { htmlBody: field },
      })
    } catch (error) {
      if (error instanceof TemplateError) return renderRefusal(field, error)
      throw error
    }
  }
  return undefined
}

/** The template a preview renders: the parts given, or the one in effect with the parts given laid over it. */
async function previewSource(
  db: D1Database,
  kind: string,
  locale: string,
  parts: Partial<z.infer<typeof Parts>>,
): Promise<TemplateSource> {
  const channel = 'email'
  if (parts.subject !== undefined && parts.textBody !== undefined && parts.htmlBody !== undefined) {
    return {
      kind,
      locale,
      channel,
      version: 0,
      subject: parts.subject,
      textBody: parts.textBody,
      htmlBody: parts.htmlBody,
    }
  }
  const active = await templateInEffect(db, kind, locale, channel)
  if (!active) throw new ApiError('NOT_FOUND', `no active template for (${kind}, ${locale}, ${channel})`)
  return { ...active, ...parts }
}

/** The in-app template a preview renders: the parts given, or the one in effect with the parts given laid over it. */
async function inAppPreviewParts(
  db: D1Database,
  kind: string,
  locale: string,
  given: Partial<InAppBody>,
): Promise<InAppTemplateParts> {
  if (given.title !== undefined && given.body !== undefined) {
    return inAppPartsOf({ ...given, title: given.title, body: given.body })
  }
  const active = await templateInEffect(db, kind, locale, 'in-app')
  if (!active) throw new ApiError('NOT_FOUND', `no active template for (${kind}, ${locale}, in-app)`)
  const defined = Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined))
  return inAppPartsOf({ ...inAppTemplateOf(active), ...defined })
}

/** Saves a checked template as the new active version, with its audit row (`template.save`) in the same transaction. */
async function saveChecked(
  db: D1Database,
  operator: Operator,
  source: Omit<TemplateSource, 'version'>,
  now: string,
): Promise<number> {
  try {
    const target = `${source.kind}/${source.locale}/${source.channel}`
    const audit = (saved: number) =>
      auditChange(db, operator, { action: 'template.save', target, parameters: { version: saved } }, now)
    return await saveTemplate(db, source, now, audit)
  } catch (error) {
    if (/UNIQUE|constraint/i.test((error as Error).message)) {
      throw new ApiError('CONFLICT', 'another version was saved at the same moment; send it again')
    }
    throw error
  }
}

/** `/v1/templates`: the LiquidJS templates in D1. */
export const templates = createRouter()
  .openapi(get, async (c) => {
    const { kind, locale, channel } = c.req.valid('param')
    const template = await templateInEffect(c.env.DB, kind, locale, channel)
    if (!template) {
      const missing =
        channel === 'in-app' && !hasInApp(kind)
          ? `${kind} has no in-app templates (its event type declares none)`
          : `no active template for (${kind}, ${locale}, ${channel})`
      throw new ApiError('NOT_FOUND', missing)
    }
    return c.json(channel === 'in-app' ? inAppView(template) : template, 200)
  })
  .openapi(
    put,
    async (c) => {
      const { kind, locale, channel } = c.req.valid('param')
      refuseChannel(kind, channel)
      // The body as sent, read by its channel's schema: the union the document shows keeps only one
      // option's fields.
      const body = await c.req.json()
      const model = exampleModelOf(kind) ?? {}
      const limits = configOf(c.env).templateLimits
      const now = new Date().toISOString()
      if (channel === 'in-app') {
        const parts = inAppPartsOf(bodyOf(InAppParts, body))
        const rendered = tryRenderInApp(kind, locale, parts, model, limits)
        const source = inAppSource(kind, locale, 0, parts)
        const version = await saveChecked(c.env.DB, c.get('operator'), source, now)
        return c.json({ ...inAppView({ ...source, version, createdAt: now }), preview: inAppItem(rendered) }, 200)
      }
      const parts = bodyOf(Parts, body)
      const preview = tryRender({ kind, locale, channel, version: 0, ...parts }, model, limits)
      const version = await saveChecked(c.env.DB, c.get('operator'), { kind, locale, channel, ...parts }, now)
      return c.json({ kind, locale, channel, version, createdAt: now, ...parts, preview }, 200)
    },
    (result, c) => {
      if (result.success) return undefined
      // The body is documented as either channel's; zod-validator hands the hook the body as sent.
      if (result.target === 'json') {
        refuseByChannel(c.req.param('kind'), c.req.param('channel'), (result as { data?: unknown }).data)
      }
      throw new ApiError('INVALID_REQUEST', 'the request does not match its schema', toFieldIssues(result.error))
    },
  )
  .openapi(preview, async (c) => {
    const input = c.req.valid('json')
    const model = input.model ?? exampleModelOf(input.kind) ?? {}
    const limits = configOf(c.env).templateLimits
    if (input.channel === 'in-app') {
      const { kind, locale, channel, model: _, ...given } = input
      refuseChannel(kind, channel)
      const parts = await inAppPreviewParts(c.env.DB, kind, locale, given)
      return c.json(inAppItem(tryRenderInApp(kind, locale, parts, model, limits)), 200)
    }
    const { kind, locale, model: _, channel: __, ...parts } = input
    return c.json(tryRender(await previewSource(c.env.DB, kind, locale, parts), model, limits), 200)
  })
