/**
 * `npm run docs:config`: rewrites the two variable tables of
 * docs/configuration.md from the zod schemas that parse them (the Worker's in
 * src/config.ts, the bridge's in bridge/src/config.ts). A test fails when the
 * committed tables differ from what this writes.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'
import { ConfigSchema as BridgeSchema } from '../bridge/src/config.ts'
import { ConfigSchema as WorkerSchema } from '../src/config.ts'

type Field = { description?: string; default?: unknown; secret?: boolean }

const FILE = 'docs/configuration.md'

function cell(value: unknown): string {
  if (value === undefined) return '—'
  const text = typeof value === 'string' ? value : JSON.stringify(value)
  return `\`${text}\``
}

/** A markdown table of a config schema: name, kind (Worker only), default, required, meaning. */
export function variableTable(schema: z.ZodType, withKind: boolean): string {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as {
    properties: Record<string, Field>
    required?: string[]
  }
  const required = new Set(json.required ?? [])
  const header = withKind
    ? '| name | kind | default | meaning |\n| --- | --- | --- | --- |'
    : '| name | default | meaning |\n| --- | --- | --- |'
  const rows = Object.entries(json.properties).map(([name, field]) => {
    const fallback = field.default === undefined && required.has(name) ? 'required' : cell(field.default)
    const meaning = (field.description ?? '').replaceAll('|', '\\|')
    return withKind
      ? `| \`${name}\` | ${field.secret ? 'secret' : 'var'} | ${fallback} | ${meaning} |`
      : `| \`${name}\` | ${fallback} | ${meaning} |`
  })
  return [header, ...rows].join('\n')
}

/** The repository's formatter, so that the generated file is what `biome check` accepts. */
function formatted(markdown: string): string {
  const biome = join(import.meta.dirname, '..', 'node_modules', '.bin', 'biome')
  return execFileSync(biome, ['format', `--stdin-file-path=${FILE}`], { input: markdown, encoding: 'utf8' })
}

/** docs/configuration.md with both tables as the schemas have them today, formatted. */
export function configurationDoc(current = readFileSync(FILE, 'utf8')): string {
  const replace = (text: string, name: string, table: string) =>
    text.replace(
      new RegExp(`(<!-- ${name}: generated -->)[\\s\\S]*?(<!-- ${name}: end -->)`),
      (_, start: string, end: string) => `${start}\n\n${table}\n\n${end}`,
    )
  return formatted(
    replace(
      replace(current, 'worker', variableTable(WorkerSchema, true)),
      'bridge',
      variableTable(BridgeSchema, false),
    ),
  )
}

if (import.meta.main) {
  writeFileSync(FILE, configurationDoc())
  console.log(`written ${FILE}`)
}
