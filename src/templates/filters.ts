import type { Liquid } from 'liquidjs'

const DAY_WORDS: Record<string, Partial<Record<Intl.LDMLPluralRule, string>>> = {
  ru: { one: 'день', few: 'дня', many: 'дней', other: 'дня' },
  en: { one: 'day', other: 'days' },
}

// Intl formatters are costly to build and immutable: one per (locale, currency) per isolate,
// not one per rendered value. The currency comes from event data, so the cache is bounded.
const FORMATS_LIMIT = 200
const formats = new Map<string, Intl.NumberFormat | Intl.PluralRules>()

function cachedFormat<T extends Intl.NumberFormat | Intl.PluralRules>(key: string, build: () => T): T {
  let format = formats.get(key) as T | undefined
  if (!format) {
    format = build()
    if (formats.size >= FORMATS_LIMIT) formats.clear()
    formats.set(key, format)
  }
  return format
}

const moneyFormat = (locale: string, currency: string) =>
  cachedFormat(
    `money|${locale}|${currency}`,
    () => new Intl.NumberFormat(locale, { style: 'currency', currency, maximumFractionDigits: 0 }),
  )

const pluralRulesOf = (locale: string) => cachedFormat(`plural|${locale}`, () => new Intl.PluralRules(locale))

function localeOf(scope: { getSync(paths: string[]): unknown }): string {
  const locale = scope.getSync(['locale'])
  return typeof locale === 'string' ? locale : 'ru'
}

/**
 * The filters a template uses to speak its recipient's language: `money`,
 * `days` and `plural`, each by the `locale` the render puts in scope. They
 * are charged like every other filter (the sandbox registers them first and
 * meters all of them after).
 */
export function registerLocaleFilters(engine: Liquid): void {
  /** `{{ 45000 | money: 'RUB' }}` → `45 000 ₽` in Russian, `RUB 45,000` in English. */
  engine.registerFilter('money', function (value: unknown, currency: unknown) {
    const amount = typeof value === 'number' ? value : Number(value)
    if (!Number.isFinite(amount)) return ''
    return moneyFormat(localeOf(this.context), typeof currency === 'string' ? currency : 'RUB').format(amount)
  })
  /** `{{ 14 | days }}` → `14 дней` / `14 days`. */
  engine.registerFilter('days', function (value: unknown) {
    const count = Number(value)
    const locale = localeOf(this.context)
    const words = DAY_WORDS[locale.slice(0, 2)] ?? DAY_WORDS.en
    const rule = pluralRulesOf(locale).select(count)
    return `${count} ${words?.[rule] ?? words?.other}`
  })
  /**
   * `{{ 5 | plural: "новый отклик", "новых отклика", "новых откликов" }}` → `новых откликов`;
   * `{{ 1 | plural: "new response", "new responses" }}` → `new response`. The forms are the
   * locale's plural categories in the order one, few, many; the last form given stands for every
   * category without its own (`other`, and `few`/`many` where a language has none).
   */
  engine.registerFilter('plural', function (value: unknown, ...forms: unknown[]) {
    const words = forms.map((form) => (typeof form === 'string' ? form : String(form ?? '')))
    if (words.length === 0) return ''
    const index = { one: 0, few: 1, many: 2 }[pluralRulesOf(localeOf(this.context)).select(Number(value)) as string]
    return words[index ?? words.length - 1] ?? words[words.length - 1]
  })
}
