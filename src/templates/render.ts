import { Liquid, type Template } from 'liquidjs'

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

const DAY_WORDS: Record<string, Partial<Record<Intl.LDMLPluralRule, string>>> = {
  ru: { one: 'день', few: 'дня', many: 'дней', other: 'дня' },
  en: { one: 'day', other: 'days' },
}

function localeOf(scope: { getSync(paths: string[]): unknown }): string {
  const locale = scope.getSync(['locale'])
  return typeof locale === 'string' ? locale : 'ru'
}

function createEngine(escapeHtml: boolean): Liquid {
  const engine = new Liquid({
    ...(escapeHtml ? { outputEscape: 'escape' as const } : {}),
    strictFilters: true,
    ownPropertyOnly: true,
  })
  /** `{{ 45000 | money: 'RUB' }}` → `45 000 ₽` in Russian, `RUB 45,000` in English. */
  engine.registerFilter('money', function (value: unknown, currency: unknown) {
    const amount = typeof value === 'number' ? value : Number(value)
    if (!Number.isFinite(amount)) return ''
    return new Intl.NumberFormat(localeOf(this.context), {
      style: 'currency',
      currency: typeof currency === 'string' ? currency : 'RUB',
      maximumFractionDigits: 0,
    }).format(amount)
  })
  /** `{{ 14 | days }}` → `14 дней` / `14 days`. */
  engine.registerFilter('days', function (value: unknown) {
    const count = Number(value)
    const locale = localeOf(this.context)
    const words = DAY_WORDS[locale.slice(0, 2)] ?? DAY_WORDS.en
    const rule = new Intl.PluralRules(locale).select(count)
    return `${count} ${words?.[rule] ?? words?.other}`
  })
  return engine
}

// Subject and text are plain text; only the HTML part escapes every value.
const plain = createEngine(false)
const html = createEngine(true)

type Parsed = { subject: Template[]; text: Template[]; html: Template[] }
const cache = new Map<string, Parsed>()
const CACHE_LIMIT = 500

/** Parses the three parts; throws LiquidJS's error (with line and column) on bad syntax. */
export function parseTemplate(source: Pick<TemplateSource, 'subject' | 'textBody' | 'htmlBody'>): Parsed {
  return { subject: plain.parse(source.subject), text: plain.parse(source.textBody), html: html.parse(source.htmlBody) }
}

/**
 * Renders a template with `model` (plus `locale`). Parsed templates are cached
 * per (kind, locale, channel, version): a version is immutable once saved;
 * `cache: false` is for drafts (previews), which have no version yet.
 */
export function render(
  source: TemplateSource,
  model: Record<string, unknown>,
  locale: string,
  options: { cache?: boolean } = {},
): Rendered {
  const key = `${source.kind}|${source.locale}|${source.channel}|${source.version}`
  let parsed = options.cache === false ? undefined : cache.get(key)
  if (!parsed) {
    parsed = parseTemplate(source)
    if (options.cache !== false) {
      if (cache.size >= CACHE_LIMIT) cache.clear()
      cache.set(key, parsed)
    }
  }
  const scope = { ...model, locale }
  return {
    subject: (plain.renderSync(parsed.subject, scope) as string).replace(/\s+/g, ' ').trim(),
    text: plain.renderSync(parsed.text, scope) as string,
    html: html.renderSync(parsed.html, scope) as string,
  }
}
