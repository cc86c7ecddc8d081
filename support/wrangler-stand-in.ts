/**
 * A stand-in for the `wrangler` commands scripts/deploy.ts runs, for its test
 * (test/node/deploy.test.ts): Cloudflare's API cannot be reached from a test,
 * so this keeps a small account — D1 databases, KV namespaces, queues, one
 * Worker with its secrets, applied migrations — in the JSON file named by
 * WRANGLER_STAND_IN_STATE, and records every call in it.
 *
 * What it prints follows wrangler 4.156.2 (node_modules/wrangler/wrangler-dist/cli.js,
 * built from github.com/cloudflare/workers-sdk, packages/wrangler/src/):
 * - `d1 list --json`: the API's database objects, `JSON.stringify(dbs, null, 2)`, no banner (d1/list.ts);
 * - `d1 create`: "✅ Successfully created DB '…'" and a config snippet (d1/create.ts);
 * - `kv namespace list`: the namespaces, `JSON.stringify(namespaces, null, "  ")`, no banner (kv/index.ts);
 * - `kv namespace create`: "🌀 Creating namespace with title …", "✨ Success!" and a snippet (kv/index.ts);
 * - `queues list`: a cli-table3 table of id, name, created_on, modified_on, producers, consumers (queues/cli/commands/list.ts);
 * - `queues info`: "Queue Name: …" lines, or `Queue "…" does not exist.` (queues/cli/commands/info.ts, queues/client.ts);
 * - `queues create` / `queues update`: queues/cli/commands/create.ts and update.ts;
 * - `secret list`: `[{ "name", "type": "secret_text" }]`, or `Worker "…" not found.` for a Worker that does not
 *   exist yet (secret/index.ts); `secret put` on such a Worker creates a draft Worker first (createDraftWorker);
 * - `d1 migrations apply` / `list`: "✅ No migrations to apply!" or "Migrations to be applied:" and a table
 *   (d1/migrations/apply.ts, list.ts);
 * - `deploy`: refuses a queue that does not exist (`Queue "…" does not exist. To create it, run: wrangler queues
 *   create …`, deploy-helpers/src/triggers/queue-consumers.ts), else "Uploaded …", "Deployed … triggers",
 *   "Current Version ID: …".
 * Errors go to stderr as "✘ [ERROR] …" with exit code 1, as wrangler's UserError does; where the text of an
 * error comes from Cloudflare's API rather than from wrangler, it is the stand-in's own and says "(stand-in)".
 * Only what deploy.ts needs is here; anything else exits 2 so that a new call cannot pass unnoticed.
 */
import { randomUUID } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'

type Database = {
  uuid: string
  name: string
  created_at: string
  version: string
  num_tables: number
  file_size: number
}
type Namespace = { id: string; title: string; supports_url_encoding: boolean }
type Queue = {
  queue_id: string
  queue_name: string
  created_on: string
  modified_on: string
  settings: { message_retention_period?: number; delivery_delay?: number }
  producers_total_count: number
  consumers_total_count: number
}
type Account = {
  d1: Database[]
  kv: Namespace[]
  queues: Queue[]
  /** The Worker, once `secret put` made a draft of it or `deploy` uploaded it. */
  worker: { name: string; draft: boolean; secrets: string[]; deployments: number } | null
  /** Applied migrations, by database uuid. */
  migrations: Record<string, string[]>
  /** Every call, its arguments joined by spaces. */
  calls: string[]
}

const VERSION = '4.156.2'

function banner(): void {
  const text = ` ⛅️ wrangler ${VERSION}`
  console.log(`\n${text}\n${'─'.repeat(text.length)}`)
}

function fail(message: string): never {
  console.error(`\n✘ [ERROR] ${message}\n`)
  process.exit(1)
}

/** The default cli-table3 table wrangler's logger.table draws: a line between every row, one space of padding. */
function table(rows: Record<string, string>[]): string {
  if (rows.length === 0) return ''
  const head = Object.keys(rows[0] as Record<string, string>)
  const cells = [head, ...rows.map((row) => head.map((key) => row[key] ?? ''))]
  const widths = head.map((_, column) => Math.max(...cells.map((line) => (line[column] as string).length)) + 2)
  const rule = (left: string, mid: string, right: string) =>
    left + widths.map((width) => '─'.repeat(width)).join(mid) + right
  const line = (values: string[]) =>
    `│${values.map((value, column) => ` ${value.padEnd((widths[column] as number) - 2)} `).join('│')}│`
  const out = [rule('┌', '┬', '┐')]
  cells.forEach((values, index) => {
    if (index > 0) out.push(rule('├', '┼', '┤'))
    out.push(line(values))
  })
  out.push(rule('└', '┴', '┘'))
  return out.join('\n')
}

/** The few fields of ./wrangler.toml this stand-in needs, read on its own (not with deploy.ts's reader). */
function config() {
  const text = readFileSync('wrangler.toml', 'utf8')
  const blocks = text.split(/^(?=\[)/m)
  const value = (block: string, key: string) => new RegExp(`^${key}\\s*=\\s*"([^"]*)"`, 'm').exec(block)?.[1]
  const of = (header: string) => blocks.filter((block) => block.startsWith(header))
  return {
    name: value(blocks[0] ?? '', 'name') ?? '',
    d1: of('[[d1_databases]]').map((block) => ({
      binding: value(block, 'binding'),
      name: value(block, 'database_name'),
      id: value(block, 'database_id'),
      migrationsDir: value(block, 'migrations_dir') ?? 'migrations',
    })),
    kv: of('[[kv_namespaces]]').map((block) => value(block, 'id')),
    queues: [...of('[[queues.producers]]'), ...of('[[queues.consumers]]')].map((block) => value(block, 'queue')),
    crons: /^crons\s*=\s*\[([^\]]*)\]/m.exec(text)?.[1]?.match(/"[^"]*"/g) ?? [],
  }
}

function option(args: string[], name: string): string | undefined {
  const index = args.indexOf(name)
  return index >= 0 ? args[index + 1] : undefined
}

const statePath = process.env.WRANGLER_STAND_IN_STATE
if (!statePath) {
  console.error('wrangler stand-in: WRANGLER_STAND_IN_STATE is not set')
  process.exit(2)
}
const account: Account = existsSync(statePath)
  ? (JSON.parse(readFileSync(statePath, 'utf8')) as Account)
  : { d1: [], kv: [], queues: [], worker: null, migrations: {}, calls: [] }
const save = () => writeFileSync(statePath, `${JSON.stringify(account, null, 2)}\n`)

const args = process.argv.slice(2)
account.calls.push(args.join(' '))
save()

const now = () => new Date().toISOString()
// The command's words (`kv namespace create`, `d1 migrations apply`, `queues list`, …) and its positional argument.
const words = args.filter((arg, index) => !arg.startsWith('--') && !args[index - 1]?.startsWith('--'))
const depth = words[0] === 'kv' || words[1] === 'migrations' ? 3 : 2
const verb = words.slice(0, depth).join(' ')
const positional = words[depth] ?? ''
const queueNamed = (name: string) => account.queues.find((queue) => queue.queue_name === name)
const noSuchQueue = (name: string): never =>
  fail(`Queue "${name}" does not exist. To create it, run: wrangler queues create ${name}`)

function databaseOf(nameOrBinding: string) {
  const entry = config().d1.find((db) => db.name === nameOrBinding || db.binding === nameOrBinding)
  if (!entry) fail(`Couldn't find a D1 DB with the name or binding '${nameOrBinding}' in your wrangler.toml file.`)
  const db = account.d1.find((candidate) => candidate.uuid === entry.id)
  if (!db)
    fail(
      `A request to the Cloudflare API (/accounts/…/d1/database/${entry.id}/query) failed.\n\n  (stand-in) no database ${entry.id}`,
    )
  const files = existsSync(entry.migrationsDir)
    ? readdirSync(entry.migrationsDir)
        .filter((file) => file.endsWith('.sql'))
        .sort()
    : []
  const applied = account.migrations[db.uuid] ?? []
  return { db, unapplied: files.filter((file) => !applied.includes(file)) }
}

switch (verb) {
  case 'd1 list': {
    if (!args.includes('--json')) banner()
    console.log(JSON.stringify(account.d1, null, 2))
    break
  }
  case 'd1 create': {
    const name = positional
    banner()
    if (account.d1.some((db) => db.name === name))
      fail(
        `A request to the Cloudflare API (/accounts/…/d1/database) failed.\n\n  (stand-in) a database named ${name} exists`,
      )
    const db: Database = {
      uuid: randomUUID(),
      name,
      created_at: now(),
      version: 'production',
      num_tables: 0,
      file_size: 0,
    }
    account.d1.push(db)
    save()
    console.log(`✅ Successfully created DB '${name}' in region WEUR`)
    console.log('Created your new D1 database.\n')
    console.log('To access your new D1 Database in your Worker, add the following snippet to your configuration file:')
    console.log(
      `[[d1_databases]]\nbinding = "${name.replace(/-/g, '_')}"\ndatabase_name = "${name}"\ndatabase_id = "${db.uuid}"`,
    )
    break
  }
  case 'kv namespace list': {
    console.log(JSON.stringify(account.kv, null, '  '))
    break
  }
  case 'kv namespace create': {
    const title = positional
    banner()
    console.log('Resource location: remote \n')
    console.log(`🌀 Creating namespace with title "${title}"`)
    if (account.kv.some((namespace) => namespace.title === title))
      fail(
        `A KV namespace with the title "${title}" already exists.\n\nYou can list existing namespaces with their IDs by running:\n  wrangler kv namespace list\n\nOr choose a different namespace name.`,
      )
    const namespace: Namespace = { id: randomUUID().replace(/-/g, ''), title, supports_url_encoding: true }
    account.kv.push(namespace)
    save()
    console.log('✨ Success!')
    console.log('To access your new KV Namespace in your Worker, add the following snippet to your configuration file:')
    console.log(`[[kv_namespaces]]\nbinding = "${title.replace(/-/g, '_')}"\nid = "${namespace.id}"`)
    break
  }
  case 'queues list': {
    banner()
    console.log(
      table(
        account.queues.map((queue) => ({
          id: queue.queue_id,
          name: queue.queue_name,
          created_on: queue.created_on,
          modified_on: queue.modified_on,
          producers: String(queue.producers_total_count),
          consumers: String(queue.consumers_total_count),
        })),
      ),
    )
    break
  }
  case 'queues info': {
    banner()
    const queue = queueNamed(positional) ?? noSuchQueue(positional)
    console.log(`Queue Name: ${queue.queue_name}`)
    console.log(`Queue ID: ${queue.queue_id}`)
    console.log(`Created On: ${queue.created_on}`)
    console.log(`Last Modified: ${queue.modified_on}`)
    console.log(`Number of Producers: ${queue.producers_total_count}`)
    console.log(`Number of Consumers: ${queue.consumers_total_count}`)
    break
  }
  case 'queues create': {
    const name = positional
    banner()
    console.log(`🌀 Creating queue '${name}'`)
    if (queueNamed(name))
      fail(`A request to the Cloudflare API (/accounts/…/queues) failed.\n\n  (stand-in) a queue named ${name} exists`)
    const retention = option(args, '--message-retention-period-secs')
    account.queues.push({
      queue_id: randomUUID().replace(/-/g, ''),
      queue_name: name,
      created_on: now(),
      modified_on: now(),
      settings: retention ? { message_retention_period: Number(retention) } : {},
      producers_total_count: 0,
      consumers_total_count: 0,
    })
    save()
    const binding = name.replace(/-/g, '_')
    console.log(
      `✅ Created queue '${name}'\n\nConfigure your Worker to send messages to this queue:\n\n[[queues.producers]]\nqueue = "${name}"\nbinding = "${binding}"\n\nConfigure your Worker to consume messages from this queue:\n\n[[queues.consumers]]\nqueue = "${name}"`,
    )
    break
  }
  case 'queues update': {
    const name = positional
    banner()
    const queue = queueNamed(name) ?? noSuchQueue(name)
    const retention = option(args, '--message-retention-period-secs')
    if (retention !== undefined) {
      const seconds = Number(retention)
      if (seconds < 60 || seconds > 1_209_600)
        fail(`Invalid --message-retention-period-secs value: ${seconds}. Must be between 60 and 1209600`)
      queue.settings.message_retention_period = seconds
    }
    queue.modified_on = now()
    console.log(`Updating queue ${name}.`)
    save()
    console.log(`Updated queue ${name}.`)
    break
  }
  case 'secret list': {
    const name = config().name
    if (option(args, '--format') === 'pretty') banner()
    if (!account.worker)
      fail(
        `Worker "${name}" not found.\n\nIf this is a new Worker, run \`wrangler deploy\` first to create it.\nOtherwise, check that the Worker name is correct and you're logged into the right account.`,
      )
    console.log(
      JSON.stringify(
        account.worker.secrets.map((secret) => ({ name: secret, type: 'secret_text' })),
        null,
        '  ',
      ),
    )
    break
  }
  case 'secret put': {
    const key = positional
    const name = config().name
    banner()
    const value = readFileSync(0, 'utf8').trimEnd()
    if (value === '') fail('(stand-in) the secret value is empty')
    console.log(`🌀 Creating the secret for the Worker "${name}"`)
    if (!account.worker) {
      console.log(
        `? There doesn't seem to be a Worker called "${name}". Do you want to create a new Worker with that name and add secrets to it?`,
      )
      console.log('🤖 Using fallback value in non-interactive context: yes')
      console.log(`🌀 Creating new Worker "${name}"...`)
      account.worker = { name, draft: true, secrets: [], deployments: 0 }
    }
    if (!account.worker.secrets.includes(key)) account.worker.secrets.push(key)
    save()
    console.log(`✨ Success! Uploaded secret ${key}`)
    break
  }
  case 'd1 migrations apply':
  case 'd1 migrations list': {
    const { db, unapplied } = databaseOf(positional)
    banner()
    console.log('Resource location: remote \n')
    if (unapplied.length === 0) {
      console.log('✅ No migrations to apply!')
      break
    }
    console.log('Migrations to be applied:')
    if (verb === 'd1 migrations list') {
      console.log(table(unapplied.map((file) => ({ Name: file }))))
      break
    }
    console.log(table(unapplied.map((file) => ({ name: file }))))
    console.log(
      `? About to apply ${unapplied.length} migration(s)\nYour database may not be available to serve requests during the migration, continue?`,
    )
    console.log('🤖 Using fallback value in non-interactive context: yes')
    account.migrations[db.uuid] = [...(account.migrations[db.uuid] ?? []), ...unapplied]
    save()
    console.log(table(unapplied.map((file) => ({ name: file, status: '✅' }))))
    break
  }
  case 'deploy': {
    banner()
    const wanted = config()
    for (const db of wanted.d1)
      if (!account.d1.some((candidate) => candidate.uuid === db.id))
        fail(
          `A request to the Cloudflare API (/accounts/…/workers/scripts/${wanted.name}) failed.\n\n  (stand-in) no D1 database ${db.id}`,
        )
    for (const id of wanted.kv)
      if (!account.kv.some((namespace) => namespace.id === id))
        fail(
          `A request to the Cloudflare API (/accounts/…/workers/scripts/${wanted.name}) failed.\n\n  (stand-in) no KV namespace ${id}`,
        )
    for (const queue of new Set(wanted.queues)) if (queue && !queueNamed(queue)) noSuchQueue(queue)
    const worker = account.worker ?? { name: wanted.name, draft: false, secrets: [], deployments: 0 }
    worker.draft = false
    worker.deployments += 1
    account.worker = worker
    save()
    console.log(`Uploaded ${wanted.name} (1.00 sec)`)
    console.log(`Deployed ${wanted.name} triggers (0.50 sec)`)
    console.log(`  https://${wanted.name}.stand-in.workers.dev`)
    for (const cron of wanted.crons) console.log(`  schedule: ${cron.replace(/"/g, '')}`)
    console.log(`Current Version ID: ${randomUUID()}`)
    break
  }
  default:
    console.error(`wrangler stand-in: "${args.join(' ')}" is not a command it knows`)
    process.exit(2)
}
