import { kindOf } from '../events/registry.ts'
import type { TemplateSource } from './render.ts'

/**
 * The default templates of `kinds`, from their event-type modules, as version
 * 0 of (kind, locale, 'email'). They come after the stored templates when one
 * is resolved, so a template saved through the API for a locale replaces the
 * default of that locale.
 */
export function defaultTemplates(kinds: readonly string[]): TemplateSource[] {
  return kinds.flatMap((name) =>
    Object.entries(kindOf(name)?.templates ?? {}).map(([locale, parts]) => ({
      kind: name,
      locale,
      channel: 'email',
      version: 0,
      ...parts,
    })),
  )
}
