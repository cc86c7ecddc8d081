/**
 * `notify-edge doctor`: what stands between this deployment and a delivered
 * email. Judges the local wrangler.toml (its [vars], bindings, queue
 * consumers, crons and placeholder ids) and, with NOTIFY_EDGE_URL and
 * NOTIFY_EDGE_TOKEN set, also asks the deployed Worker
 * (`GET /v1/health/config`: its secrets, its transports' pauses and open circuits, cron and Resend's word on the
 * sender's domain) — the same rules (src/health/findings.ts) either way.
 */
import { resolve } from 'node:path'
import { configIssues, SECRET_NAMES } from '../src/config.ts'
import { type Deployment, type Finding, findingsOf, hasBlocker } from '../src/health/findings.ts'
import { PLACEHOLDER_D1_ID, PLACEHOLDER_KV_ID } from '../src/health/placeholders.ts'
import { createClient } from './client.ts'

/** The parts of a wrangler configuration the doctor reads. */
export type WranglerConfig = {
  vars?: Record<string, unknown>
  d1_databases?: { binding?: string; database_id?: string }[]
  kv_namespaces?: { binding?: string; id?: string }[]
  queues?: { producers?: { binding?: string; queue?: string }[]; consumers?: { queue?: string }[] }
  send_email?: { name?: string }[]
  durable_objects?: { bindings?: { name?: string }[] }
  ratelimits?: { name?: string }[]
  triggers?: { crons?: string[] }
}

/** One report: where the findings come from, and the findings. */
type Report = { source: 'wrangler.toml' | 'worker'; where: string; findings: Finding[] }

/**
 * Reads a wrangler configuration with wrangler's own reader (TOML, JSON or
 * JSONC, exactly as a deploy reads it), rather than a parser of our own that
 * could read it otherwise. Imported only here: wrangler is large.
 */
async function readWranglerConfig(path: string): Promise<WranglerConfig> {
  const { experimental_readRawConfig } = await import('wrangler')
  return experimental_readRawConfig({ config: path }).rawConfig as WranglerConfig
}

const named = <T>(items: T[] | undefined, name: (item: T) => string | undefined): string[] =>
  (items ?? []).map(name).filter((value): value is string => typeof value === 'string')

/** A wrangler configuration as the doctor's rules see it; its secrets are not in it, so unknown. */
export function describeWranglerConfig(config: WranglerConfig, now: Date): Deployment {
  const all = Object.fromEntries(
    Object.entries(config.vars ?? {}).map(([name, value]) => [
      name,
      typeof value === 'string' ? value : JSON.stringify(value),
    ]),
  )
  const vars = Object.fromEntries(Object.entries(all).filter(([name]) => !SECRET_NAMES.includes(name)))
  const d1 = config.d1_databases ?? []
  const kv = config.kv_namespaces ?? []
  return {
    source: 'wrangler.toml',
    vars,
    exposedSecrets: Object.keys(all).filter((name) => SECRET_NAMES.includes(name)),
    invalid: configIssues(all, 'present'),
    bindings: [
      ...named(d1, (db) => db.binding),
      ...named(kv, (namespace) => namespace.binding),
      ...named(config.queues?.producers, (producer) => producer.binding),
      ...named(config.send_email, (binding) => binding.name),
      ...named(config.durable_objects?.bindings, (binding) => binding.name),
      ...named(config.ratelimits, (binding) => binding.name),
    ],
    consumers: named(config.queues?.consumers, (consumer) => consumer.queue),
    crons: config.triggers?.crons ?? [],
    placeholderResources: [
      ...d1.filter((db) => db.database_id === PLACEHOLDER_D1_ID).map((db) => `D1 database ${db.binding}`),
      ...kv.filter((namespace) => namespace.id === PLACEHOLDER_KV_ID).map((ns) => `KV namespace ${ns.binding}`),
    ],
    now,
  }
}

/** The deployed Worker's own findings; a finding of its own when it cannot be asked. */
async function workerReport(environment: Record<string, string | undefined>): Promise<Report> {
  const where = environment.NOTIFY_EDGE_URL as string
  try {
    const answer = (await createClient(environment).get('/v1/health/config')) as { findings: Finding[] }
    return { source: 'worker', where, findings: answer.findings }
  } catch (error) {
    const finding: Finding = {
      id: 'worker-unreachable',
      severity: 'warning',
      message: `could not ask the Worker: ${(error as Error).message}`,
      fix: 'check NOTIFY_EDGE_URL (the Worker’s URL) and NOTIFY_EDGE_TOKEN (its admin token)',
    }
    return { source: 'worker', where, findings: [finding] }
  }
}

const LABEL: Record<Finding['severity'], string> = { blocker: 'BLOCKER', warning: 'WARNING', info: 'INFO' }

function printed(report: Report): string {
  const title = report.source === 'worker' ? `the Worker at ${report.where}` : report.where
  if (report.findings.length === 0) return `${title}: nothing found`
  const lines = report.findings.flatMap((finding) => [
    `  ${LABEL[finding.severity].padEnd(8)} ${finding.id}`,
    `           ${finding.message}`,
    `           fix: ${finding.fix}`,
  ])
  return [`${title}:`, ...lines].join('\n')
}

function tally(findings: Finding[]): string {
  const count = (severity: Finding['severity']) => findings.filter((finding) => finding.severity === severity).length
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`
  return `${plural(count('blocker'), 'blocker')}, ${plural(count('warning'), 'warning')}, ${plural(count('info'), 'note')}`
}

/**
 * The doctor's report (text, or JSON with `json`) and its exit code: 1 when
 * anything blocks delivery, else 0.
 */
export async function doctorCommand(
  options: { config?: string; json?: boolean },
  environment: Record<string, string | undefined>,
): Promise<{ output: string; exitCode: number }> {
  const path = resolve(options.config ?? 'wrangler.toml')
  const now = new Date()
  const reports: Report[] = [
    {
      source: 'wrangler.toml',
      where: path,
      findings: findingsOf(describeWranglerConfig(await readWranglerConfig(path), now)),
    },
  ]
  const remote = Boolean(environment.NOTIFY_EDGE_URL && environment.NOTIFY_EDGE_TOKEN)
  if (remote) reports.push(await workerReport(environment))
  const all = reports.flatMap((report) => report.findings)
  const exitCode = hasBlocker(all) ? 1 : 0
  if (options.json)
    return {
      output: JSON.stringify({ reports, blockers: all.filter((f) => f.severity === 'blocker').length }, null, 2),
      exitCode,
    }
  const text = [
    ...reports.map(printed),
    remote
      ? ''
      : 'A wrangler.toml holds no secrets, pause or cron runs: set NOTIFY_EDGE_URL and NOTIFY_EDGE_TOKEN to ask the deployed Worker too.',
    tally(all),
  ]
  return { output: text.filter((line) => line !== '').join('\n\n'), exitCode }
}
