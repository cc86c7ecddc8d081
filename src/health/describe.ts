/**
 * The deployed Worker's description of itself for the doctor's rules: its
 * variables as set, which secrets and bindings it has, what its configuration
 * schema refuses, its transports' pauses and open circuits, when its cron last ran, and — when
 * the resend transport is configured with a key — Resend's word on the sender's domain;
 * for the doctor, the stored templates that do not render their example.
 * Never throws for a broken configuration: describing it is the point.
 */
import { ConfigSchema, configIssues, SECRET_NAMES } from '../config.ts'
import { GAUGES } from '../metrics/counters.ts'
import { domainOf, isPlaceholderDomain } from './placeholders.ts'
import { firstPauses } from './providers.ts'
import { recalled, remember } from './remembered.ts'
import { checkResendDomain } from './resend-domains.ts'
import { refusedTemplates } from './template-check.ts'
import { transportsOf } from './transport.ts'
import { readPauses } from './transport-reads.ts'
import type { Deployment, DomainCheck, PauseShown } from './types.ts'
import { bindingNamesOf, dbShards } from './wiring.ts'

/** The variables as set, as strings; secrets left out. */
function varsOf(env: Record<string, unknown>): Record<string, string | undefined> {
  const vars: Record<string, string | undefined> = {}
  for (const name of Object.keys(ConfigSchema.shape)) {
    const value = env[name]
    if (SECRET_NAMES.includes(name) || value === undefined || value === null) continue
    vars[name] = typeof value === 'string' ? value : JSON.stringify(value)
  }
  return vars
}

/**
 * The configured transports' pauses and the cron's last run, in one D1 round
 * trip (and one more per other shard); why not, when D1 cannot be read.
 */
async function stateOf(
  db: D1Database | undefined,
  transports: readonly string[],
  others: readonly D1Database[],
): Promise<{ pauses?: PauseShown[]; cronLastRun?: string | null; databaseError?: string }> {
  if (!db) return {}
  try {
    const [pauses, lastRun] = await db.batch([
      readPauses(db),
      db.prepare("SELECT updated_at FROM gauges WHERE name = ?1 AND labels = '{}'").bind(GAUGES.maintenanceLastRun),
    ])
    // Each D1 shard pauses on its own (src/d1/shards.ts): a pause in any of them is the transport's.
    const elsewhere = await Promise.all(others.map(async (shard) => (await readPauses(shard).all()).results))
    const found = firstPauses([...((pauses?.results ?? []) as Record<string, unknown>[]), ...elsewhere.flat()])
    return {
      pauses: found.filter((pause) => transports.includes(pause.transport)),
      cronLastRun: (lastRun?.results[0] as { updated_at: string } | undefined)?.updated_at ?? null,
    }
  } catch (error) {
    return { databaseError: error instanceof Error ? error.message : String(error) }
  }
}

/**
 * Resend's word on the sender's domain, asked only where it can tell
 * something; with `recall`, the answer of the last minute if one is kept
 * (./remembered.ts). A fresh answer is kept for the console.
 */
async function domainCheckOf(
  vars: Record<string, string | undefined>,
  apiKey: unknown,
  db: D1Database | undefined,
  options: { now: Date; recall: boolean },
): Promise<DomainCheck | undefined> {
  const from = vars.EMAIL_FROM
  if (!transportsOf({ vars }).includes('resend') || typeof apiKey !== 'string' || !apiKey || !from?.includes('@'))
    return undefined
  const domain = domainOf(from)
  if (isPlaceholderDomain(domain)) return undefined
  const name = `resend-domain:${domain}`
  const kept = db && options.recall ? await recalled(db, name, options.now) : undefined
  if (kept) return kept.result
  const answer = await checkResendDomain({ apiKey, baseUrl: vars.RESEND_API_URL ?? 'https://api.resend.com' }, domain)
  if (db) await remember(db, name, answer, options.now)
  return answer
}

/**
 * This Worker, described from its env. `recall`: reuse Resend's answer of
 * the last minute (the console's banner on every page); without it Resend is
 * asked (the doctor, `GET /v1/health/config`).
 */
export async function describeWorker(env: Env, now: Date, options: { recall?: boolean } = {}): Promise<Deployment> {
  const raw = env as unknown as Record<string, unknown>
  const vars = varsOf(raw)
  const db = raw.DB as D1Database | undefined
  const [state, domain, templatesRefused] = await Promise.all([
    stateOf(
      db,
      transportsOf({ vars }),
      dbShards(vars).flatMap(({ binding }) => (raw[binding] ? [raw[binding] as D1Database] : [])),
    ),
    domainCheckOf(vars, raw.RESEND_API_KEY, db, { now, recall: options.recall ?? false }),
    // Rendering every stored template is the doctor's to do, not every console page's.
    options.recall ? undefined : refusedTemplates(env),
  ])
  return {
    source: 'worker',
    vars,
    secrets: SECRET_NAMES.filter((name) => typeof raw[name] === 'string' && raw[name] !== ''),
    invalid: configIssues(raw),
    bindings: bindingNamesOf(vars).filter((name) => raw[name] !== undefined && raw[name] !== null),
    ...state,
    ...(domain ? { domain } : {}),
    ...(templatesRefused ? { templatesRefused } : {}),
    now,
  }
}
