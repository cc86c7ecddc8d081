import type { TemplateSource } from './sandbox.ts'

/**
 * Locales to try for a recipient, most specific first: `ru-RU → ru → DEFAULT_LOCALE`
 * (and the default's own language), without repeats.
 */
export function localeChain(locale: string | null | undefined, defaultLocale: string): string[] {
  const chain: string[] = []
  const add = (value: string | undefined) => {
    if (value && !chain.includes(value)) chain.push(value)
  }
  if (locale) {
    add(locale)
    add(locale.split('-')[0])
  }
  add(defaultLocale)
  add(defaultLocale.split('-')[0])
  return chain
}

/** The active template for (kind, channel) in the first locale of the chain that has one. */
export function resolveTemplate(
  active: readonly TemplateSource[],
  kind: string,
  channel: string,
  chain: readonly string[],
): TemplateSource | undefined {
  for (const locale of chain) {
    const found = active.find(
      (template) => template.kind === kind && template.channel === channel && template.locale === locale,
    )
    if (found) return found
  }
  return undefined
}
