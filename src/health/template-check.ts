/**
 * The stored templates in effect, checked as the pipeline renders them: each
 * parsed and rendered with its kind's example within the configured limits.
 * A template saved under older rules, or limits lowered since it was saved
 * (TEMPLATE_*), can refuse every event of its kind and locale — each ends as
 * a dead letter `NTF_TEMPLATE_INVALID` — with nothing else to say so before
 * the first event does.
 */
import { configOf } from '../config.ts'
import { exampleModelOf } from '../templates/examples.ts'
import { type Part, parsePart, render, TemplateError } from '../templates/sandbox.ts'
import { type TemplateRow, templateFromRow } from '../templates/template-store.ts'
import type { TemplateRefusal } from './types.ts'

const PARTS: Part[] = ['subject', 'textBody', 'htmlBody']

/**
 * The stored templates in effect that do not render their kind's example
 * within the configured limits; undefined when that cannot be told (no
 * database, a configuration that does not parse, a read that failed: other
 * findings say so).
 */
export async function refusedTemplates(env: Env): Promise<TemplateRefusal[] | undefined> {
  let limits: ReturnType<typeof configOf>['templateLimits']
  try {
    limits = configOf(env).templateLimits
  } catch {
    return undefined
  }
  const db = (env as { DB?: D1Database }).DB
  if (!db) return undefined
  let rows: TemplateRow[]
  try {
    const result = await db
      .prepare(
        `SELECT kind, locale, channel, version, subject, text_body, html_body, created_at FROM templates
         WHERE active = 1 ORDER BY kind, locale, channel`,
      )
      .all<TemplateRow>()
    rows = result.results
  } catch {
    return undefined
  }
  const refused: TemplateRefusal[] = []
  for (const row of rows) {
    const source = templateFromRow(row)
    const template = `${source.kind}/${source.locale}/${source.channel} version ${source.version}`
    try {
      for (const part of PARTS) parsePart(part, source[part], limits, source.channel)
    } catch (error) {
      if (!(error instanceof TemplateError)) throw error
      refused.push({ template, message: error.message, parses: false })
      continue
    }
    try {
      render(source, exampleModelOf(source.kind) ?? {}, source.locale, limits, { cache: false })
    } catch (error) {
      if (!(error instanceof TemplateError)) throw error
      refused.push({ template, message: error.message, parses: true })
    }
  }
  return refused
}
