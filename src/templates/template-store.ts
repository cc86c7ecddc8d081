import { defaultTemplates } from './defaults.ts'
import type { TemplateSource } from './sandbox.ts'

/** A `templates` row as D1 returns it. */
export type TemplateRow = {
  kind: string
  locale: string
  channel: string
  version: number
  subject: string
  text_body: string
  html_body: string
}

type Row = TemplateRow & { created_at: string }

/** The active template for (kind, locale, channel). Parameters: kind, locale, channel. */
export async function activeTemplate(db: D1Database, kind: string, locale: string, channel: string) {
  const row = await db
    .prepare(
      `SELECT kind, locale, channel, version, subject, text_body, html_body, created_at FROM templates
       WHERE kind = ?1 AND locale = ?2 AND channel = ?3 AND active = 1`,
    )
    .bind(kind, locale, channel)
    .first<Row>()
  return row ? { ...templateFromRow(row), createdAt: row.created_at } : null
}

/**
 * The template in effect for (kind, locale, channel): the active stored
 * version, else the kind's default (version 0, no `createdAt`).
 */
export async function templateInEffect(db: D1Database, kind: string, locale: string, channel: string) {
  const stored = await activeTemplate(db, kind, locale, channel)
  if (stored) return stored
  const fallback = defaultTemplates([kind]).find(
    (template) => template.locale === locale && template.channel === channel,
  )
  return fallback ? { ...fallback, createdAt: null } : null
}

/**
 * Saves a new version of (kind, locale, channel) and makes it the only active
 * one, in one batch. Returns the new version.
 */
export async function saveTemplate(
  db: D1Database,
  source: Omit<TemplateSource, 'version'>,
  now: string,
  audit?: (version: number) => D1PreparedStatement,
): Promise<number> {
  const current = await db
    .prepare(
      'SELECT coalesce(max(version), 0) AS version FROM templates WHERE kind = ?1 AND locale = ?2 AND channel = ?3',
    )
    .bind(source.kind, source.locale, source.channel)
    .first<{ version: number }>()
  const version = (current?.version ?? 0) + 1
  await db.batch([
    db
      .prepare('UPDATE templates SET active = 0 WHERE kind = ?1 AND locale = ?2 AND channel = ?3 AND active = 1')
      .bind(source.kind, source.locale, source.channel),
    db
      .prepare(
        `INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8)`,
      )
      .bind(source.kind, source.locale, source.channel, version, source.subject, source.textBody, source.htmlBody, now),
    // In the same transaction, right after the insert (its changes() is 1).
    ...(audit ? [audit(version)] : []),
  ])
  return version
}

/** A `templates` row as the renderer takes it. */
export function templateFromRow(row: TemplateRow): TemplateSource {
  return {
    kind: row.kind,
    locale: row.locale,
    channel: row.channel,
    version: row.version,
    subject: row.subject,
    textBody: row.text_body,
    htmlBody: row.html_body,
  }
}

/**
 * The active stored templates kept under `keys` (kinds, or `{kind}.digest`),
 * as one statement of a D1 batch; `templatesOf` makes its result the list a
 * template is resolved from. Parameters: JSON array of keys.
 */
export function activeTemplatesOf(db: D1Database, keys: readonly string[]): D1PreparedStatement {
  return db
    .prepare(
      `SELECT kind, locale, channel, version, subject, text_body, html_body FROM templates
       WHERE active = 1 AND kind IN (SELECT value FROM json_each(?1))`,
    )
    .bind(JSON.stringify(keys))
}

/** The templates to resolve from: the stored active ones first, then the defaults of `keys`. */
export function templatesOf(result: D1Result | undefined, keys: readonly string[]): TemplateSource[] {
  return [...((result?.results ?? []) as TemplateRow[]).map(templateFromRow), ...defaultTemplates(keys)]
}
