/**
 * What connects the Worker's parts: its bindings (D1, KV, the queue
 * producers, send_email, the send pace, the in-app feeds), the queues it consumes, its cron and
 * whether that cron runs, and the resources a deploy creates.
 */
import { DB_SHARDS_MAX, EVENTS_QUEUE_SHARDS_MAX } from '../config.ts'
import { dbBindingOf, dbNameOf } from '../d1/shard-names.ts'
import { eventsBindingOf, eventsQueueOf, QUEUES } from '../queue/names.ts'
import { transportsOf } from './transport.ts'
import type { Deployment, Finding } from './types.ts'

/** How long the every-minute maintenance cron may go unseen before it counts as not running. */
export const CRON_STALE_MINUTES = 5

/** Each binding the Worker uses, as the repository's wrangler.toml declares it. */
const BINDINGS: Record<string, string> = {
  DB: '[[d1_databases]] binding = "DB"',
  IDEMPOTENCY: '[[kv_namespaces]] binding = "IDEMPOTENCY"',
  EVENTS: `[[queues.producers]] binding = "EVENTS", queue = "${QUEUES.events}"`,
  DISPATCH: `[[queues.producers]] binding = "DISPATCH", queue = "${QUEUES.dispatch}"`,
  DLQ: `[[queues.producers]] binding = "DLQ", queue = "${QUEUES.deadLetters}"`,
  EMAIL_EVENTS: `[[queues.producers]] binding = "EMAIL_EVENTS", queue = "${QUEUES.emailEvents}"`,
  EMAIL: '[[send_email]] name = "EMAIL"',
  SEND_PACE:
    '[[durable_objects.bindings]] name = "SEND_PACE", class_name = "SendPace", and [exports.SendPace] type = "durable-object", storage = "sqlite"',
  INBOX:
    '[[durable_objects.bindings]] name = "INBOX", class_name = "InboxFeed", and [exports.InboxFeed] type = "durable-object", storage = "sqlite"',
}

/** Bindings only one transport uses, needed when it is configured: the send_email binding, and the send pace of resend. */
const TRANSPORT_OF_BINDING: Record<string, string> = { EMAIL: 'cloudflare', SEND_PACE: 'resend' }

/**
 * A binding without which the Worker still delivers, but something else
 * breaks: the throttle of failed attempts to authenticate (src/api/attempts.ts).
 */
const GUARD_BINDINGS: Record<string, string> = {
  AUTH_FAILURES: '[[ratelimits]] name = "AUTH_FAILURES", namespace_id = "1001", simple = { limit = 10, period = 60 }',
}

/** The names of the fixed bindings. */
const BINDING_NAMES = [...Object.keys(BINDINGS), ...Object.keys(GUARD_BINDINGS)]

/** The shards of notify-events past the first that EVENTS_QUEUE_SHARDS asks for, by binding and queue. */
function eventShards(vars: Deployment['vars']): { binding: string; queue: string }[] {
  const count = Number(vars.EVENTS_QUEUE_SHARDS ?? 1)
  // A count the configuration refuses is its finding alone, not a list of shards to bind.
  const shards = Number.isInteger(count) && count > 1 && count <= EVENTS_QUEUE_SHARDS_MAX ? count : 1
  return Array.from({ length: shards - 1 }, (_, index) => ({
    binding: eventsBindingOf(index + 1),
    queue: eventsQueueOf(index + 1),
  }))
}

/** The D1 shards past the primary that DB_SHARDS asks for, by binding and the database name the repository gives them. */
export function dbShards(vars: Deployment['vars']): { binding: string; database: string }[] {
  const count = Number(vars.DB_SHARDS ?? 1)
  const shards = Number.isInteger(count) && count > 1 && count <= DB_SHARDS_MAX ? count : 1
  return Array.from({ length: shards - 1 }, (_, index) => ({
    binding: dbBindingOf(index + 1),
    database: dbNameOf('notify-edge', index + 1),
  }))
}

/** The binding names a Worker with these variables may have: every fixed one, each shard of notify-events and of D1. */
export function bindingNamesOf(vars: Deployment['vars']): string[] {
  return [
    ...BINDING_NAMES,
    ...eventShards(vars).map((shard) => shard.binding),
    ...dbShards(vars).map((shard) => shard.binding),
  ]
}

/** Bindings, consumers, placeholder resources and secrets written as variables. */
export function bindingFindings(deployment: Deployment): Finding[] {
  const findings: Finding[] = []
  const transports: readonly string[] = transportsOf(deployment)
  const shards = eventShards(deployment.vars)
  const declared: Record<string, string> = { ...BINDINGS }
  for (const { binding, queue } of shards)
    declared[binding] = `[[queues.producers]] binding = "${binding}", queue = "${queue}"`
  for (const { binding, database } of dbShards(deployment.vars))
    declared[binding] =
      `[[d1_databases]] binding = "${binding}", database_name = "${database}", migrations_dir = "migrations/d1"`
  const needed = Object.keys(declared).filter((name) => {
    const only = TRANSPORT_OF_BINDING[name]
    return only === undefined || transports.includes(only)
  })
  const unbound = needed.filter((name) => !deployment.bindings.includes(name))
  if (unbound.length > 0) {
    findings.push({
      id: 'bindings-missing',
      severity: 'blocker',
      message: `not bound: ${unbound.join(', ')}; the Worker cannot take, send or record notifications without them`,
      fix: `add to wrangler.toml, as the repository's has them (a shard of notify-events or of D1 as docs/scaling.md shows it): ${unbound.map((name) => declared[name]).join('; ')}; then npm run deploy`,
    })
  }
  const unguarded = Object.keys(GUARD_BINDINGS).filter((name) => !deployment.bindings.includes(name))
  if (unguarded.length > 0) {
    findings.push({
      id: 'auth-throttle-missing',
      severity: 'warning',
      message: `not bound: ${unguarded.join(', ')}; failed sign-ins and unknown tokens are counted but never throttled, so guessing a token is free`,
      fix: `add to wrangler.toml, as the repository's has it: ${unguarded.map((name) => GUARD_BINDINGS[name]).join('; ')}; then npm run deploy`,
    })
  }
  const consumed: string[] = [...Object.values(QUEUES), ...shards.map((shard) => shard.queue)]
  const unconsumed = deployment.consumers && consumed.filter((q) => !deployment.consumers?.includes(q))
  if (unconsumed && unconsumed.length > 0) {
    findings.push({
      id: 'queue-consumers-missing',
      severity: 'blocker',
      message: `no consumer for ${unconsumed.join(', ')}: messages put there wait and are never handled`,
      fix: `add a [[queues.consumers]] for each to wrangler.toml (queue = "${unconsumed[0]}", …), with the settings the repository's wrangler.toml gives it (a shard of notify-events takes notify-events' own, as docs/scaling.md shows)`,
    })
  }
  if (deployment.databaseError) {
    findings.push({
      id: 'database-unreadable',
      severity: 'blocker',
      message: `the D1 database could not be read (${deployment.databaseError}): nothing can be taken or sent`,
      fix: 'npm run deploy (it applies the migrations before the code), and check that database_id in wrangler.toml is the id of the notify-edge database in npx wrangler d1 list',
    })
  }
  const placeholders = deployment.placeholderResources ?? []
  if (placeholders.length > 0) {
    findings.push({
      id: 'resources-placeholder',
      // Not a blocker: the deploy script finds or creates each resource and writes its id in their place.
      severity: 'info',
      message: `wrangler.toml still has the repository's placeholder id of ${placeholders.join(' and ')}: not deployed from here yet`,
      fix: 'npm run deploy finds them on the account, or creates them, and writes their ids into wrangler.toml: commit it afterwards',
    })
  }
  const exposed = deployment.exposedSecrets ?? []
  if (exposed.length > 0) {
    findings.push({
      id: 'secrets-in-vars',
      severity: 'warning',
      message: `${exposed.join(', ')} ${exposed.length === 1 ? 'is' : 'are'} in [vars]: plain text in wrangler.toml, in the repository and in the dashboard`,
      fix: `remove ${exposed.length === 1 ? 'it' : 'them'} from [vars], then ${exposed.map((name) => `npx wrangler secret put ${name}`).join('; ')}`,
    })
  }
  return findings
}

const CRON_FIX =
  'check that wrangler.toml has [triggers] crons = ["* * * * *"], then npm run deploy; `npx wrangler tail` shows each run and its errors'

/**
 * The maintenance cron: declared, and running. It re-sends notifications
 * whose dispatch message was lost, probes and releases a paused transport,
 * and keeps the database under D1's limit; without it those wait for good.
 */
export function cronFindings(deployment: Deployment): Finding[] {
  const { crons, cronLastRun, now } = deployment
  if (crons !== undefined && crons.length === 0) {
    return [
      {
        id: 'cron-missing',
        severity: 'blocker',
        message:
          'no cron trigger: stuck notifications are never sent again, a paused transport is never probed, nothing is pruned',
        fix: 'add [triggers] crons = ["* * * * *"] to wrangler.toml, then npm run deploy',
      },
    ]
  }
  if (cronLastRun === undefined) return []
  const minutes = cronLastRun === null ? Infinity : (now.getTime() - Date.parse(cronLastRun)) / 60_000
  if (minutes <= CRON_STALE_MINUTES) return []
  return [
    {
      id: 'cron-stale',
      severity: 'blocker',
      message:
        cronLastRun === null
          ? 'the maintenance cron has never run: stuck notifications are not sent again and a paused transport is not probed'
          : `the cron has not run in the last ${CRON_STALE_MINUTES} minutes (last run ${cronLastRun}): stuck notifications are not sent again and a paused transport is not probed`,
      fix: CRON_FIX,
    },
  ]
}
