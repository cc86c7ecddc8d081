import {
  CaptureTag,
  CaseTag,
  Context,
  defaultOperators,
  type Emitter,
  evalToken,
  type FilterImplOptions,
  ForTag,
  Liquid,
  TablerowTag,
  Tag,
  type TagToken,
  type Template,
  TokenKind,
  type TopLevelToken,
  toValue,
  toValueSync,
} from 'liquidjs'
import type { TemplateLimits } from '../config.ts'
import { registerLocaleFilters } from './filters.ts'

/** A template as stored: Liquid sources of the three parts. */
export type TemplateSource = {
  kind: string
  locale: string
  channel: string
  version: number
  subject: string
  textBody: string
  htmlBody: string
}

/** The rendered parts of one message. */
export type Rendered = { subject: string; text: string; html: string }

/** A part of a template, by its field name. */
export type Part = 'subject' | 'textBody' | 'htmlBody'

/**
 * The share of the pipeline's render limits that a preview, and the render
 * of the example payload that checks a template before it is saved, have.
 *
 * A preview is asked for by any operator, a viewer too, and renders in the
 * same isolate as the queue consumers: a tenth bounds what one can take from
 * them. A template saved within a tenth on its example payload leaves the
 * pipeline ten times the room for real events larger than the example.
 */
export const PREVIEW_SHARE = 10

/**
 * The limits of a preview or a save: a tenth (PREVIEW_SHARE) of the render
 * time, the render steps and the memory of `limits`. Parsing and output keep
 * theirs: a template the pipeline can hold must be one an operator can save.
 */
export function previewLimits(limits: TemplateLimits): TemplateLimits {
  const share = (value: number, floor: number) => Math.max(floor, Math.floor(value / PREVIEW_SHARE))
  return {
    ...limits,
    renderMs: share(limits.renderMs, 1),
    steps: share(limits.steps, 100),
    memory: share(limits.memory, 1000),
    preview: true,
  }
}

/** The variable that sets a limit, as a message names it: a preview's is a share of it. */
function variable(limits: TemplateLimits, name: string): string {
  return limits.preview ? `a preview's and a save's: 1/${PREVIEW_SHARE} of ${name}` : name
}

/** Characters of a rendered subject (one header line, RFC 5322 allows 998). */
export const SUBJECT_MAX_CHARS = 998

/** Why a template could not be used, naming the part and, for a limit, which one. */
export class TemplateError extends Error {
  readonly part: Part
  readonly limit: 'parse' | 'render time' | 'render steps' | 'memory' | 'output' | undefined

  constructor(part: Part, message: string, limit?: TemplateError['limit']) {
    super(message)
    this.name = 'TemplateError'
    this.part = part
    this.limit = limit
  }
}

/**
 * The tags that read another template by name. A template here is one text
 * kept in D1, with no file system behind it: LiquidJS's fallback for these,
 * built for browsers, reaches for `document` and fails with "document is not
 * defined" — a message about the engine, not about the template.
 */
const FILE_TAGS = ['include', 'render', 'layout'] as const

/** What a template may not do, said in the template's words: shown to the operator as it is. */
class NotAvailable extends Error {}

/** A tag that refuses, when the template is parsed, with a message that names it. */
function unavailable(name: (typeof FILE_TAGS)[number]) {
  return class extends Tag {
    constructor(token: TagToken, remainTokens: TopLevelToken[], liquid: Liquid) {
      super(token, remainTokens, liquid)
      throw new NotAvailable(`{% ${name} %} is not available: a template is one text and reads no other template`)
    }
    *render(): Generator<unknown, void, unknown> {}
  }
}

/** What a loop walks, in allocation units: a range is charged by LiquidJS already. */
function sizeOf(value: unknown): number {
  if (Array.isArray(value)) return value.length
  if (typeof value === 'string') return 1
  if (typeof value === 'object' && value !== null) return Object.keys(value).length
  return 0
}

/**
 * A loop tag that charges what it walks to the memory limit before it walks
 * it, so that nested loops over an event's data are bounded like ranges are.
 */
function charged<T extends typeof ForTag | typeof TablerowTag>(Base: T): T {
  const Loop = Base as unknown as typeof ForTag
  return class extends Loop {
    override *render(context: Context, emitter: Emitter): ReturnType<InstanceType<typeof ForTag>['render']> {
      if (this.collection.kind !== TokenKind.Range) {
        context.memoryLimit.use(sizeOf(yield evalToken(this.collection, context)))
      }
      return yield* super.render(context, emitter)
    }
  } as unknown as T
}

/**
 * The work a filter or a comparison does on a value, in allocation units:
 * what it walks — a string's or a list's length, an object's keys. Most of
 * LiquidJS's filters and operators walk their input and charge nothing for
 * it; without this, one node (`{{ list | sum }}`, `{% if a == b %}` on long
 * lists) could cost seconds while the step limit counted one.
 */
function workOf(value: unknown): number {
  if (typeof value === 'string' || Array.isArray(value)) return value.length
  if (typeof value === 'object' && value !== null) return Object.keys(value).length
  return 0
}

/** A filter that evaluates an expression per element (`where_exp`, `find_exp`…) costs this many units an element. */
const PER_ELEMENT_EXPRESSION = 10

/** Filters that cost more than their input's size, by what a call costs at least: `date` builds a time zone's formatter each call. */
const CALL_COST: Record<string, number> = { date: 500 }

/** Every filter of `engine` charges the work of its input and arguments before it runs. */
function chargeFilters(engine: Liquid): void {
  for (const [name, impl] of Object.entries(engine.filters)) {
    const handler = typeof impl === 'function' ? impl : impl.handler
    if (!handler) continue
    const weight = name.endsWith('_exp') ? PER_ELEMENT_EXPRESSION : 1
    const wrapped: typeof handler = function (this, value, ...args) {
      let work = (CALL_COST[name] ?? 0) + weight * workOf(value)
      for (const arg of args) work += workOf(arg)
      this.context.memoryLimit.use(work)
      return handler.call(this, value, ...args)
    }
    engine.registerFilter(
      name,
      typeof impl === 'function' ? wrapped : ({ ...impl, handler: wrapped } as FilterImplOptions),
    )
  }
}

/** LiquidJS's operators, the comparisons (`==`, `contains`…) charging the work of their operands. */
const chargedOperators = Object.fromEntries(
  Object.entries(defaultOperators).map(([name, operator]) => [
    name,
    // `not` takes one operand; `and` and `or` only combine what was charged already.
    name === 'not' || name === 'and' || name === 'or'
      ? operator
      : function* (left: unknown, right: unknown, context: Context): Generator<unknown, unknown, unknown> {
          context.memoryLimit.use(workOf(left) + workOf(right))
          return yield (operator as (l: unknown, r: unknown, c: Context) => unknown)(left, right, context)
        },
  ]),
) as typeof defaultOperators

/**
 * `case`, whose `when`s are compared with the charged `==` (LiquidJS compares
 * them directly): the same rendering otherwise — every branch whose value
 * matches is rendered, else the `else`.
 */
class ChargedCase extends CaseTag {
  override *render(context: Context, emitter: Emitter): Generator<unknown, void, unknown> {
    const renderer = this.liquid.renderer
    const target = yield toValue(yield this.value.value(context, context.opts.lenientIf))
    const equal = context.opts.operators['=='] as (l: unknown, r: unknown, c: Context) => unknown
    let hit = false
    for (const branch of this.branches) {
      for (const token of branch.values) {
        const value = yield evalToken(token, context, context.opts.lenientIf)
        if (yield equal(target, value, context)) {
          yield renderer.renderTemplates(branch.templates, context, emitter)
          hit = true
          break
        }
      }
    }
    if (!hit) yield renderer.renderTemplates(this.elseTemplates, context, emitter)
  }
}

/** Characters one `capture` may hold: the largest output a part may have (TEMPLATE_OUTPUT_LIMIT_BYTES ≤ 400000). */
const CAPTURE_MAX_CHARS = 400_000

/**
 * `capture`, held to the output cap and charged what it captured. LiquidJS
 * renders a capture into an emitter of its own, with no cap, and charges
 * nothing: a template of a kilobyte that doubles a capture two dozen times
 * built gigabytes and took the process down.
 */
class CappedCapture extends CaptureTag {
  override *render(context: Context): Generator<unknown, void, string> {
    const emitter = new CappedEmitter(CAPTURE_MAX_CHARS)
    yield this.liquid.renderer.renderTemplates(this.templates, context, emitter) as unknown as string
    context.memoryLimit.use(emitter.buffer.length)
    context.bottom()[this.variable] = emitter.buffer
  }
}

/**
 * How an engine writes each output (`{{ … }}`): as it is, HTML-escaped, or
 * on one line — an in-app template's third part is three lines (link,
 * action label, action address, ./in-app.ts), and a producer's value holding
 * a line break must not move the parts after it into the action.
 */
type OutputMode = 'plain' | 'html' | 'line'

const ON_ONE_LINE = (value: unknown) => String(value ?? '').replace(/[\r\n]+/g, ' ')

function createEngine(mode: OutputMode, parseLimit: number): Liquid {
  const engine = new Liquid({
    ...(mode === 'html' ? { outputEscape: 'escape' as const } : mode === 'line' ? { outputEscape: ON_ONE_LINE } : {}),
    strictFilters: true,
    ownPropertyOnly: true,
    parseLimit,
    operators: chargedOperators,
  })
  for (const name of FILE_TAGS) engine.registerTag(name, unavailable(name))
  engine.registerTag('for', charged(ForTag))
  engine.registerTag('tablerow', charged(TablerowTag))
  engine.registerTag('case', ChargedCase)
  engine.registerTag('capture', CappedCapture)
  registerLocaleFilters(engine)
  chargeFilters(engine)
  return engine
}

/**
 * Collects rendered output and stops the render as soon as it exceeds its
 * cap, so a loop that prints a little many times fails early instead of
 * building hundreds of megabytes first. UTF-16 units never outnumber UTF-8
 * bytes, so stopping on units is safe; the exact bytes are checked after.
 */
class CappedEmitter implements Emitter {
  buffer = ''
  readonly #cap: number

  constructor(cap: number) {
    this.#cap = cap
  }

  write(html: unknown): void {
    const value = toValue(html)
    this.buffer += Array.isArray(value) ? value.join('') : value === null || value === undefined ? '' : String(value)
    if (this.buffer.length > this.#cap) throw new OutputLimit()
  }
}

class OutputLimit extends Error {}

class StepLimit extends Error {}

/**
 * LiquidJS checks its render limit with the clock's time before each template
 * node it renders. Deployed on Cloudflare the clock does not move while code
 * runs without I/O — a render — so that check never fires there; counting
 * the checks does. A part that renders more nodes than `limits.steps` stops
 * at the node past the budget, the same everywhere, whatever the clock says.
 * (LiquidJS accepts any limiter with its `check` and `use` in a Context.)
 */
function renderLimiter(limits: TemplateLimits): Context['renderLimit'] {
  const deadline = performance.now() + limits.renderMs
  let steps = 0
  const limiter = {
    check(now: number) {
      steps += 1
      if (steps > limits.steps) throw new StepLimit()
      if (now > deadline) throw new Error('template render limit exceeded')
    },
    use() {},
  }
  return limiter as unknown as Context['renderLimit']
}

// Subject and text are plain text; only the HTML part escapes every value.
const engines = new Map<number, Record<OutputMode, Liquid>>()

function enginesFor(parseLimit: number) {
  let pair = engines.get(parseLimit)
  if (!pair) {
    pair = {
      plain: createEngine('plain', parseLimit),
      html: createEngine('html', parseLimit),
      line: createEngine('line', parseLimit),
    }
    engines.set(parseLimit, pair)
  }
  return pair
}

const cache = new Map<string, Parsed>()
const CACHE_LIMIT = 500

const LIMIT_OF: [RegExp, TemplateError['limit']][] = [
  [/parse length limit exceeded/, 'parse'],
  [/template render limit exceeded/, 'render time'],
  [/memory alloc limit exceeded/, 'memory'],
]

/**
 * LiquidJS's error for one part, as a TemplateError that names the part and
 * the limit it broke; its message calls the part `name` (an in-app
 * template's parts have names of their own: ./in-app.ts).
 */
function templateError(part: Part, error: unknown, limits: TemplateLimits, name: string = part): TemplateError {
  if (error instanceof TemplateError) return error
  // LiquidJS wraps what a tag's render throws (our OutputLimit among them) in its RenderError.
  for (let cause: unknown = error; cause; cause = (cause as { originalError?: unknown }).originalError) {
    if (cause instanceof OutputLimit) return outputError(part, limits, name)
    if (cause instanceof StepLimit) {
      return new TemplateError(
        part,
        `${name} renders more than the limit of ${limits.steps} template nodes — tags, outputs and text, each time a loop repeats them (${variable(limits, 'TEMPLATE_RENDER_STEPS')})`,
        'render steps',
      )
    }
  }
  const message = error instanceof Error ? error.message : String(error)
  const limit = LIMIT_OF.find(([pattern]) => pattern.test(message))?.[1]
  if (limit === 'parse') {
    return new TemplateError(
      part,
      `${name} is longer than the parse limit of ${limits.parseChars} characters (TEMPLATE_PARSE_LIMIT)`,
      limit,
    )
  }
  if (limit === 'render time') {
    return new TemplateError(
      part,
      `${name} took longer than the render limit of ${limits.renderMs} ms (${variable(limits, 'TEMPLATE_RENDER_LIMIT_MS')})`,
      limit,
    )
  }
  if (limit === 'memory') {
    return new TemplateError(
      part,
      `${name} needs more than the memory limit of ${limits.memory} units — loop iterations, ranges, built strings (${variable(limits, 'TEMPLATE_MEMORY_LIMIT')})`,
      limit,
    )
  }
  // A ReferenceError or TypeError from inside the engine ("document is not defined", "cannot read
  // properties of undefined") is about how the engine is built, not about the template: nothing an
  // operator can act on, so only its place is kept. LiquidJS's own errors, ours, and an error about
  // a value (a RangeError: "Invalid currency code") keep their words.
  let root: unknown = error
  while ((root as { originalError?: unknown })?.originalError) root = (root as { originalError: unknown }).originalError
  if (root instanceof ReferenceError || root instanceof TypeError) {
    const place = /, line:\d+, col:\d+$/.exec(message)?.[0] ?? ''
    return new TemplateError(part, `${name} could not be rendered: the template engine failed${place}`)
  }
  return new TemplateError(part, message)
}

function outputError(part: Part, limits: TemplateLimits, name: string = part): TemplateError {
  return part === 'subject'
    ? new TemplateError(part, `the rendered ${name} is longer than ${SUBJECT_MAX_CHARS} characters`, 'output')
    : new TemplateError(
        part,
        `the rendered ${name} is larger than the output limit of ${limits.outputBytes} bytes (TEMPLATE_OUTPUT_LIMIT_BYTES)`,
        'output',
      )
}

/**
 * Liquid tokens in one part at most: tags and outputs (`{% %}`, `{{ }}`), and
 * inside them filters, `and`/`or`/`contains` and lines (a `{% liquid %}` tag
 * is a tag a line). LiquidJS's parse time grows faster than their count
 * (40 000 outputs took 1.8 s to parse, a `{% liquid %}` tag of 15 000 lines
 * 0.4 s); an email's template has a few hundred, and its length is mostly
 * text, which is one node however long.
 */
export const MAX_TOKENS = 5000

/** The Liquid tokens of `text`, as MAX_TOKENS counts them. */
function liquidTokensOf(text: string): number {
  let count = 0
  for (const [tag] of text.matchAll(/\{\{[\s\S]*?(?:\}\}|$)|\{%[\s\S]*?(?:%\}|$)/g)) {
    count += 1 + (tag.match(/\||\b(?:or|and|contains)\b|\n/g)?.length ?? 0)
  }
  return count
}

/** A parsed template: each part's nodes. */
export type Parsed = Record<Part, Template[]>

/**
 * Whether a part is HTML, rendered with its output escaped: an email's HTML
 * body. An in-app template's third part is the lines of its link and action
 * (./in-app.ts): plain text, where an escaped `&` would break an address.
 */
function isHtml(part: Part, channel: string | undefined): boolean {
  return part === 'htmlBody' && channel !== 'in-app'
}

/** The engine of a part: an email's HTML escapes its outputs, an in-app item's lines keep each output on one line. */
function engineOf(engines: ReturnType<typeof enginesFor>, part: Part, channel: string | undefined): Liquid {
  if (isHtml(part, channel)) return engines.html
  return part === 'htmlBody' && channel === 'in-app' ? engines.line : engines.plain
}

/**
 * Parses one part; throws a TemplateError naming it (LiquidJS's line and
 * column, or the limit it broke), called `name` in its message.
 */
export function parsePart(
  part: Part,
  text: string,
  limits: TemplateLimits,
  channel?: string,
  name: string = part,
): Template[] {
  if (text.length > limits.parseChars) {
    throw new TemplateError(
      part,
      `${name} is longer than the parse limit of ${limits.parseChars} characters (TEMPLATE_PARSE_LIMIT)`,
      'parse',
    )
  }
  const tokens = liquidTokensOf(text)
  if (tokens > MAX_TOKENS) {
    throw new TemplateError(
      part,
      `${name} has ${tokens} Liquid tokens (tags, outputs, and the filters, operators and lines inside them): at most ${MAX_TOKENS}`,
      'parse',
    )
  }
  try {
    return engineOf(enginesFor(limits.parseChars), part, channel).parse(text)
  } catch (error) {
    throw templateError(part, error, limits, name)
  }
}

/** Parses the three parts; throws a TemplateError naming the first part that does not parse. */
function parseTemplate(source: Pick<TemplateSource, Part | 'channel'>, limits: TemplateLimits): Parsed {
  return {
    subject: parsePart('subject', source.subject, limits),
    textBody: parsePart('textBody', source.textBody, limits),
    htmlBody: parsePart('htmlBody', source.htmlBody, limits, source.channel),
  }
}

/**
 * Renders a template with `model` (plus `locale`) within `limits`; throws a
 * TemplateError naming the part and the limit it broke. Parsed templates are
 * cached per (kind, locale, channel, version) and limits: a version is
 * immutable once saved; `cache: false` is for drafts (previews), which have
 * no version yet, and `parsed` for a draft parsed already. `names` calls the
 * parts in its errors' messages what an operator edits them as.
 */
export function render(
  source: TemplateSource,
  model: Record<string, unknown>,
  locale: string,
  limits: TemplateLimits,
  options: { cache?: boolean; parsed?: Parsed; names?: Partial<Record<Part, string>> } = {},
): Rendered {
  const key = `${source.kind}|${source.locale}|${source.channel}|${source.version}|${limits.parseChars}`
  let parsed = options.parsed ?? (options.cache === false ? undefined : cache.get(key))
  if (!parsed) {
    parsed = parseTemplate(source, limits)
    if (options.cache !== false) {
      if (cache.size >= CACHE_LIMIT) cache.clear()
      cache.set(key, parsed)
    }
  }
  const { plain } = enginesFor(limits.parseChars)
  const scope = { ...model, locale }
  const part = (name: Part, engine: Liquid, cap: number): string => {
    const emitter = new CappedEmitter(cap)
    try {
      const context = new Context(
        scope,
        engine.options,
        { sync: true, memoryLimit: limits.memory },
        { renderLimit: renderLimiter(limits) },
      )
      toValueSync(engine.renderer.renderTemplates(parsed[name], context, emitter))
    } catch (error) {
      throw templateError(name, error, limits, options.names?.[name])
    }
    if (name !== 'subject' && new TextEncoder().encode(emitter.buffer).byteLength > limits.outputBytes) {
      throw outputError(name, limits, options.names?.[name])
    }
    return emitter.buffer
  }
  // The subject is one header line: its whitespace collapses, and it is capped in characters.
  const subject = part('subject', plain, Math.max(SUBJECT_MAX_CHARS * 8, 8192))
    .replace(/\s+/g, ' ')
    .trim()
  if (subject.length > SUBJECT_MAX_CHARS) throw outputError('subject', limits, options.names?.subject)
  return {
    subject,
    text: part('textBody', plain, limits.outputBytes),
    html: part('htmlBody', engineOf(enginesFor(limits.parseChars), 'htmlBody', source.channel), limits.outputBytes),
  }
}
