/**
 * `npm run deploy`: everything a deploy of the Worker needs, in the order it
 * needs it, on an account where nothing exists yet as on one where everything
 * does (docs/deploy.md says why each step is there):
 *
 * 1. the secrets the Worker cannot run without are set (`wrangler secret list`);
 *    when one is missing it stops here, before anything is created or deployed;
 * 2. the D1 database (and each shard's, DB_1, …) and the KV namespace exist (`wrangler d1 list --json`,
 *    `wrangler kv namespace list`; created when missing), and wrangler.toml holds
 *    their ids: a placeholder id is replaced, an id the account does not have stops it;
 * 3. every queue wrangler.toml names exists (`wrangler queues list`, then
 *    `wrangler queues info` for a name the first page does not show; created when
 *    missing), and notify-dlq keeps messages 14 days (`wrangler queues update`);
 * 4. the D1 migrations are applied remotely, to every shard, and none is left unapplied;
 * 5. `wrangler deploy`.
 *
 * It runs the `wrangler` first on PATH (`npm run` puts node_modules/.bin there),
 * in the current directory, with its wrangler.toml.
 */
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { unstable_readConfig } from 'wrangler'
import { z } from 'zod'
import { ConfigSchema } from '../src/config.ts'
import { transportsOf } from '../src/health/transport.ts'

/** The ids wrangler.toml ships with: local runs ignore them, a deploy replaces them. */
export const PLACEHOLDER_D1_ID = '00000000-0000-4000-8000-000000000001'

/**
 * The placeholder id of a D1 shard past the primary (DB_1, DB_2, …: docs/scaling.md), one of its own
 * so that a deploy replaces each with its own database's id.
 */
export function placeholderShardId(shard: number): string {
  return `00000000-0000-4000-8000-1${String(shard).padStart(11, '0')}`
}
export const PLACEHOLDER_KV_ID = '00000000000000000000000000000001'
/** The dead-letter queue, whose consumer retries for about 94 hours (wrangler.toml, src/dead-letters/dlq-consumer.ts). */
export const DEAD_LETTER_QUEUE = 'notify-dlq'
/** 14 days, the longest message retention Cloudflare Queues allows. */
export const DEAD_LETTER_RETENTION_SECONDS = 14 * 24 * 60 * 60

const CONFIG_FILE = 'wrangler.toml'

class DeployError extends Error {}

/** The parts of wrangler.toml this script acts on. */
export type DeployConfig = {
  name: string
  /** The email transports: EMAIL_TRANSPORTS when it names any, else EMAIL_TRANSPORT (`cloudflare` unset). */
  emailTransports: readonly string[]
  d1: { binding: string; name: string; id: string }
  /** The D1 shards past the primary (DB_1, DB_2, …), in binding order: each created and migrated as the primary is. */
  shards: { binding: string; name: string; id: string; placeholder: string }[]
  kv: { binding: string; id: string }
  /** Every queue a producer or consumer names, dead-letter queues included, in the file's order. */
  queues: string[]
}

/** A variable of [vars] as the Worker reads it: a string, or unset. */
const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined)

/** The parts of wrangler's reading of its configuration this script uses. */
type WranglerConfig = {
  name: string | undefined
  vars: Record<string, unknown>
  d1_databases: { binding: string; database_name?: string; database_id?: string }[]
  kv_namespaces: { binding: string; id?: string }[]
  queues: { producers?: { queue: string }[]; consumers?: { queue: string; dead_letter_queue?: string }[] }
}

/**
 * Reads wrangler.toml's name, its email transports (EMAIL_TRANSPORTS, else EMAIL_TRANSPORT), its one D1 database, its one KV
 * namespace and its queues, with wrangler's own reader of its configuration
 * (what `wrangler deploy` will read).
 */
export function readDeployConfig(path = CONFIG_FILE): DeployConfig {
  const config = unstable_readConfig({ config: path }) as unknown as WranglerConfig
  const only = <T>(items: T[], what: string): T => {
    if (items.length !== 1) throw new DeployError(`${path} must have exactly one ${what} (it has ${items.length})`)
    return items[0] as T
  }
  const required = (found: string | undefined, what: string) => {
    if (!found) throw new DeployError(`${path}: ${what} is missing`)
    return found
  }
  // The primary (DB) and its shards (DB_1, …: src/d1/shards.ts); no other database.
  const others = config.d1_databases.filter((db) => db.binding !== 'DB')
  const strange = others.find((db) => !/^DB_[1-9][0-9]?$/.test(db.binding))
  if (strange)
    throw new DeployError(`${path}: [[d1_databases]] binding "${strange.binding}" is neither DB nor a shard DB_n`)
  const d1 = only(
    config.d1_databases.filter((db) => db.binding === 'DB'),
    '[[d1_databases]] binding = "DB"',
  )
  const kv = only(config.kv_namespaces, '[[kv_namespaces]]')
  const queues = [
    ...(config.queues.producers ?? []).map((producer) => producer.queue),
    ...(config.queues.consumers ?? []).flatMap((consumer) => [consumer.queue, consumer.dead_letter_queue]),
  ].filter((queue): queue is string => typeof queue === 'string')
  return {
    name: required(config.name, 'name'),
    // As the Worker reads them: EMAIL_TRANSPORTS when it names any, else EMAIL_TRANSPORT, else cloudflare.
    emailTransports: transportsOf({
      vars: {
        EMAIL_TRANSPORT: text(config.vars.EMAIL_TRANSPORT),
        EMAIL_TRANSPORTS: text(config.vars.EMAIL_TRANSPORTS),
      },
    }),
    d1: {
      binding: d1.binding,
      name: required(d1.database_name, '[[d1_databases]] database_name'),
      id: required(d1.database_id, '[[d1_databases]] database_id'),
    },
    shards: others
      .map((db) => ({
        binding: db.binding,
        name: required(db.database_name, `[[d1_databases]] ${db.binding} database_name`),
        id: required(db.database_id, `[[d1_databases]] ${db.binding} database_id`),
        placeholder: placeholderShardId(Number(db.binding.slice(3))),
      }))
      .sort((a, b) => Number(a.binding.slice(3)) - Number(b.binding.slice(3))),
    kv: { binding: kv.binding, id: required(kv.id, '[[kv_namespaces]] id') },
    queues: [...new Set(queues)],
  }
}

/**
 * The secrets a deploy insists on: every secret src/config.ts requires, the
 * console's session key (without it the console is closed), and when resend
 * is among the transports (`EMAIL_TRANSPORT = "resend"`, or EMAIL_TRANSPORTS
 * naming it) the API key and the webhook's signing secret.
 */
export function requiredSecrets(emailTransports: readonly string[]): string[] {
  const schema = z.toJSONSchema(ConfigSchema, { io: 'input', unrepresentable: 'any' }) as {
    properties: Record<string, { secret?: boolean; default?: unknown }>
    required?: string[]
  }
  const required = new Set(schema.required ?? [])
  const always = Object.entries(schema.properties)
    .filter(([name, field]) => field.secret && required.has(name) && field.default === undefined)
    .map(([name]) => name)
  return [
    ...always,
    'CONSOLE_SESSION_KEY',
    ...(emailTransports.includes('resend') ? ['RESEND_API_KEY', 'RESEND_WEBHOOK_SECRET'] : []),
  ]
}

/** The KV namespace's title when this script creates it: the Worker's name and the binding, as wrangler names what it provisions. */
export function namespaceTitle(config: DeployConfig): string {
  return `${config.name}-${config.kv.binding.toLowerCase().replaceAll('_', '-')}`
}

type Run = { status: number; stdout: string; stderr: string }

function say(line: string): void {
  process.stdout.write(`[deploy] ${line}\n`)
}

/** Runs wrangler and returns its output (for the commands whose answer this script reads). */
function read(args: string[]): Run {
  const result = spawnSync('wrangler', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  if (result.error) throw new DeployError(`could not run wrangler: ${result.error.message}`)
  return { status: result.status ?? 1, stdout: result.stdout, stderr: result.stderr }
}

/** Like `read`, but fails unless wrangler succeeded. */
function readOk(args: string[]): string {
  const result = read(args)
  if (result.status !== 0)
    throw new DeployError(
      `wrangler ${args.join(' ')} failed (exit ${result.status}):\n${result.stderr}${result.stdout}`,
    )
  return result.stdout
}

/** Runs wrangler with this terminal (its output and any question it asks are the operator's), and fails unless it succeeded. */
function act(args: string[]): void {
  say(`wrangler ${args.join(' ')}`)
  const result = spawnSync('wrangler', args, { stdio: 'inherit' })
  if (result.error) throw new DeployError(`could not run wrangler: ${result.error.message}`)
  if (result.status !== 0) throw new DeployError(`wrangler ${args.join(' ')} failed (exit ${result.status})`)
}

/** The JSON wrangler printed: its first `[` to its last `]` (a banner or notice around it is not part of it). */
function jsonArray<T>(output: string, what: string): T[] {
  const start = output.indexOf('[')
  const end = output.lastIndexOf(']')
  if (start < 0 || end < start) throw new DeployError(`could not read ${what} from wrangler's output:\n${output}`)
  return JSON.parse(output.slice(start, end + 1)) as T[]
}

/** The values of one column of a table wrangler drew (`logger.table`, cli-table3 with its default borders). */
export function tableColumn(output: string, column: string): string[] {
  const rows = output
    .split('\n')
    .filter((line) => line.startsWith('│'))
    .map((line) =>
      line
        .split('│')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    )
  const index = rows[0]?.indexOf(column) ?? -1
  if (index < 0) return []
  return rows.slice(1).map((row) => row[index] as string)
}

/** Which of the required secrets the Worker lacks; all of them when the Worker does not exist yet. */
function missingSecrets(config: DeployConfig): string[] {
  const required = requiredSecrets(config.emailTransports)
  const result = read(['secret', 'list', '--format', 'json'])
  if (result.status !== 0) {
    if (/Worker "[^"]*"[^\n]* not found/.test(result.stderr + result.stdout)) return required
    throw new DeployError(`wrangler secret list failed (exit ${result.status}):\n${result.stderr}${result.stdout}`)
  }
  const present = new Set(jsonArray<{ name: string }>(result.stdout, 'the secrets').map((secret) => secret.name))
  return required.filter((name) => !present.has(name))
}

/** wrangler.toml with `placeholder` replaced by `id` (the placeholder appears once). */
function writeId(text: string, placeholder: string, id: string, what: string): string {
  if (text.split(`"${placeholder}"`).length !== 2)
    throw new DeployError(`${CONFIG_FILE}: the placeholder of ${what} is not there once`)
  say(`${CONFIG_FILE}: ${what} is ${id}`)
  return text.replace(`"${placeholder}"`, `"${id}"`)
}

/** The primary D1 database and each shard's. */
function ensureDatabases(config: DeployConfig, text: string): string {
  let written = ensureDatabase({ ...config.d1, placeholder: PLACEHOLDER_D1_ID }, text)
  for (const shard of config.shards) written = ensureDatabase(shard, written)
  return written
}

function ensureDatabase(database: { name: string; id: string; placeholder: string }, text: string): string {
  type Database = { uuid: string; name: string }
  const list = () => jsonArray<Database>(readOk(['d1', 'list', '--json']), 'the D1 databases')
  let databases = list()
  const { name, id, placeholder } = database
  if (id !== placeholder) {
    const byId = databases.find((db) => db.uuid === id)
    const byName = databases.find((db) => db.name === name)
    if (!byId)
      throw new DeployError(
        `${CONFIG_FILE} names D1 database_id ${id}, which this account does not have` +
          (byName ? ` (its database "${name}" is ${byName.uuid})` : ` (nor a database named "${name}")`) +
          `. Put the right id there, or ${placeholder} to let npm run deploy find or create "${name}".`,
      )
    if (byId.name !== name)
      throw new DeployError(`${CONFIG_FILE}: D1 database_id ${id} is the database "${byId.name}", not "${name}"`)
    say(`D1 database "${name}" exists (${id})`)
    return text
  }
  if (!databases.some((db) => db.name === name)) {
    act(['d1', 'create', name])
    databases = list()
  } else say(`D1 database "${name}" exists`)
  const db = databases.find((candidate) => candidate.name === name)
  if (!db) throw new DeployError(`D1 database "${name}" is not listed after its creation`)
  return writeId(text, placeholder, db.uuid, `database_id of "${name}"`)
}

function ensureNamespace(config: DeployConfig, text: string): string {
  type Namespace = { id: string; title: string }
  const list = () => jsonArray<Namespace>(readOk(['kv', 'namespace', 'list']), 'the KV namespaces')
  let namespaces = list()
  const title = namespaceTitle(config)
  const { binding, id } = config.kv
  if (id !== PLACEHOLDER_KV_ID) {
    if (!namespaces.some((namespace) => namespace.id === id)) {
      const byTitle = namespaces.find((namespace) => namespace.title === title)
      throw new DeployError(
        `${CONFIG_FILE} names KV namespace id ${id} (binding ${binding}), which this account does not have` +
          (byTitle ? ` (its namespace "${title}" is ${byTitle.id})` : '') +
          `. Put the right id there, or ${PLACEHOLDER_KV_ID} to let npm run deploy find or create "${title}".`,
      )
    }
    say(`KV namespace of ${binding} exists (${id})`)
    return text
  }
  if (!namespaces.some((namespace) => namespace.title === title)) {
    act(['kv', 'namespace', 'create', title])
    namespaces = list()
  } else say(`KV namespace "${title}" exists`)
  const namespace = namespaces.find((candidate) => candidate.title === title)
  if (!namespace) throw new DeployError(`KV namespace "${title}" is not listed after its creation`)
  return writeId(text, PLACEHOLDER_KV_ID, namespace.id, `the id of KV namespace "${title}"`)
}

/** Whether a queue exists, asked by name (`wrangler queues info`), for one the first page of `queues list` did not show. */
function queueExists(name: string): boolean {
  const result = read(['queues', 'info', name])
  if (result.status === 0) return true
  if (/does not exist/.test(result.stderr + result.stdout)) return false
  throw new DeployError(
    `wrangler queues info ${name} failed (exit ${result.status}):\n${result.stderr}${result.stdout}`,
  )
}

function ensureQueues(config: DeployConfig): void {
  const listed = new Set(tableColumn(readOk(['queues', 'list']), 'name'))
  for (const queue of config.queues) {
    if (listed.has(queue) || queueExists(queue)) say(`queue ${queue} exists`)
    else act(['queues', 'create', queue])
  }
  if (config.queues.includes(DEAD_LETTER_QUEUE))
    act([
      'queues',
      'update',
      DEAD_LETTER_QUEUE,
      '--message-retention-period-secs',
      String(DEAD_LETTER_RETENTION_SECONDS),
    ])
}

/** The migrations, in the primary and then in every shard: each has the whole schema. */
function migrate(config: DeployConfig): void {
  for (const { name } of [config.d1, ...config.shards]) {
    act(['d1', 'migrations', 'apply', name, '--remote'])
    // Declining wrangler's question leaves migrations unapplied and still exits 0: the new code must not go live then.
    const left = readOk(['d1', 'migrations', 'list', name, '--remote'])
    if (!left.includes('No migrations to apply'))
      throw new DeployError(`D1 migrations are still unapplied in "${name}", so nothing was deployed:\n${left}`)
  }
}

export function deploy(): void {
  let text = readFileSync(CONFIG_FILE, 'utf8')
  const config = readDeployConfig()

  const missing = missingSecrets(config)
  if (missing.length > 0) {
    throw new DeployError(
      [
        `the Worker "${config.name}" lacks ${missing.length === 1 ? 'a secret it needs' : 'secrets it needs'}; nothing was created or deployed. Set ${missing.length === 1 ? 'it' : 'each'} with:`,
        ...missing.map((name) => `  npx wrangler secret put ${name}`),
        'On an account without the Worker, the first `secret put` creates it (empty until the deploy). docs/deploy.md#secrets says what each one is.',
      ].join('\n'),
    )
  }
  say(`secrets: ${requiredSecrets(config.emailTransports).join(', ')} are set`)

  // Each id is written as soon as it is known: a run that stops later finds it there the next time.
  for (const ensure of [ensureDatabases, ensureNamespace]) {
    const written = ensure(config, text)
    if (written === text) continue
    writeFileSync(CONFIG_FILE, written)
    text = written
    say(`${CONFIG_FILE} now holds this account's id: commit it`)
  }
  ensureQueues(config)
  migrate(config)
  act(['deploy'])
}

if (import.meta.main) {
  try {
    deploy()
  } catch (error) {
    if (!(error instanceof DeployError)) throw error
    process.stderr.write(`[deploy] ${error.message}\n`)
    process.exit(1)
  }
}
