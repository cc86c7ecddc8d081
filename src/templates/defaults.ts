import { templateKeys } from '../events/registry.ts'
import { inAppSource } from './in-app.ts'
import type { TemplateSource } from './sandbox.ts'

/**
 * The default templates of `kinds` — kind names, or a digest's key
 * (`ResponseCreated.digest`) — from their event-type modules, as version 0 of
 * (kind, locale, 'email') and, for a kind with an in-app item, of (kind,
 * locale, 'in-app'). They come after the stored templates when one is
 * resolved, so a template saved through the API for a locale replaces the
 * default of that locale.
 */
export function defaultTemplates(kinds: readonly string[]): TemplateSource[] {
  const keys = templateKeys()
  return kinds.flatMap((name) => {
    const entry = keys.find((key) => key.key === name)
    return [
      ...Object.entries(entry?.templates ?? {}).map(([locale, parts]) => ({
        kind: name,
        locale,
        channel: 'email',
        version: 0,
        ...parts,
      })),
      ...Object.entries(entry?.inApp ?? {}).map(([locale, parts]) => inAppSource(name, locale, 0, parts)),
    ]
  })
}
