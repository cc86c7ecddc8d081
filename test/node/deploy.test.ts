/**
 * `npm run deploy` (scripts/deploy.ts) against a stand-in `wrangler` first on
 * PATH (support/wrangler-stand-in.ts), which keeps a Cloudflare account in a
 * JSON file: Cloudflare's API is out of a test's reach. Each project is a copy
 * of wrangler.toml and the D1 migrations in a directory of its own.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'

import { placeholderShardId } from '../../scripts/deploy.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const DEPLOY = join(ROOT, 'scripts', 'deploy.ts')
const STAND_IN = join(ROOT, 'support', 'wrangler-stand-in.ts')
const D1_PLACEHOLDER = '00000000-0000-4000-8000-000000000001'
const KV_PLACEHOLDER = '00000000000000000000000000000001'
const QUEUES = ['notify-events', 'notify-dispatch', 'notify-dlq', 'notify-email-events']
const SECRETS = ['INGEST_TOKEN', 'ADMIN_TOKEN', 'UNSUBSCRIBE_SIGNING_KEY', 'CONSOLE_SESSION_KEY']

type Account = {
  d1: { uuid: string; name: string }[]
  kv: { id: string; title: string }[]
  queues: { queue_name: string; settings: { message_retention_period?: number } }[]
  worker: { name: string; draft: boolean; secrets: string[]; deployments: number } | null
  migrations: Record<string, string[]>
  calls: string[]
}

type Project = {
  dir: string
  account: () => Account
  setAccount: (account: Account) => void
  wranglerToml: () => string
  /** Runs `wrangler …` (the stand-in) in the project, as an operator would. */
  wrangler: (args: string[], input?: string) => ReturnType<typeof spawnSync>
  deploy: () => { status: number | null; output: string }
}

const projects: string[] = []
after(() => {
  for (const dir of projects) rmSync(dir, { recursive: true, force: true })
})

function project(): Project {
  const dir = mkdtempSync(join(tmpdir(), 'notify-edge-deploy-'))
  projects.push(dir)
  cpSync(join(ROOT, 'wrangler.toml'), join(dir, 'wrangler.toml'))
  cpSync(join(ROOT, 'migrations', 'd1'), join(dir, 'migrations', 'd1'), { recursive: true })
  const bin = join(dir, 'bin')
  mkdirSync(bin)
  writeFileSync(join(bin, 'wrangler'), `#!/bin/sh\nexec "${process.execPath}" "${STAND_IN}" "$@"\n`)
  chmodSync(join(bin, 'wrangler'), 0o755)
  const state = join(dir, 'account.json')
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, WRANGLER_STAND_IN_STATE: state }
  const setAccount = (account: Account) => writeFileSync(state, JSON.stringify(account))
  setAccount({ d1: [], kv: [], queues: [], worker: null, migrations: {}, calls: [] })
  return {
    dir,
    account: () => JSON.parse(readFileSync(state, 'utf8')) as Account,
    setAccount,
    wranglerToml: () => readFileSync(join(dir, 'wrangler.toml'), 'utf8'),
    wrangler: (args, input = '') => spawnSync('wrangler', args, { cwd: dir, env, input, encoding: 'utf8' }),
    deploy: () => {
      const result = spawnSync(process.execPath, [DEPLOY], { cwd: dir, env, encoding: 'utf8', timeout: 120_000 })
      return { status: result.status, output: result.stdout + result.stderr }
    },
  }
}

/** The calls that change the account, from the `from`-th call on. */
function changes(account: Account, from = 0): string[] {
  return account.calls
    .slice(from)
    .filter((call) =>
      /^(d1 create|kv namespace create|queues (create|update)|d1 migrations apply|deploy|secret put)/.test(call),
    )
}

const migrationFiles = () =>
  readdirSync(join(ROOT, 'migrations', 'd1'))
    .filter((file) => file.endsWith('.sql'))
    .sort()

test('on an empty account, missing secrets stop it before anything is created or deployed', () => {
  const empty = project()
  const run = empty.deploy()
  assert.equal(run.status, 1, run.output)
  for (const secret of SECRETS) assert.match(run.output, new RegExp(`npx wrangler secret put ${secret}\\n`))
  assert.doesNotMatch(run.output, /RESEND_/, 'EMAIL_TRANSPORT is cloudflare: no Resend secret is asked for')
  const account = empty.account()
  assert.deepEqual(account.calls, ['secret list --format json'])
  assert.deepEqual([account.d1, account.kv, account.queues, account.worker], [[], [], [], null])
  assert.match(empty.wranglerToml(), new RegExp(D1_PLACEHOLDER))
})

let fresh: Project
let firstRunCalls = 0

before(() => {
  fresh = project()
  for (const secret of SECRETS) {
    const put = fresh.wrangler(['secret', 'put', secret], `value-of-${secret}-0123456789abcdef0123456789`)
    assert.equal(put.status, 0, String(put.stderr))
  }
})

test('with its secrets put, an empty account gets D1, KV and the 4 queues, in order, then migrations, then the deploy', () => {
  const put = fresh.account()
  assert.deepEqual(
    put.worker,
    { name: 'notify-edge', draft: true, secrets: SECRETS, deployments: 0 },
    'secret put drafted the Worker',
  )
  const from = put.calls.length

  const run = fresh.deploy()
  assert.equal(run.status, 0, run.output)
  const account = fresh.account()
  firstRunCalls = account.calls.length
  assert.deepEqual(changes(account, from), [
    'd1 create notify-edge',
    'kv namespace create notify-edge-idempotency',
    ...QUEUES.map((queue) => `queues create ${queue}`),
    'queues update notify-dlq --message-retention-period-secs 1209600',
    'd1 migrations apply notify-edge --remote',
    'deploy',
  ])
  // The secrets were checked before anything else.
  assert.equal(account.calls[from], 'secret list --format json')

  const toml = fresh.wranglerToml()
  assert.equal(account.d1.length, 1)
  assert.equal(account.kv.length, 1)
  assert.match(toml, new RegExp(`^database_id = "${account.d1[0]?.uuid}"`, 'm'))
  assert.match(toml, new RegExp(`^id = "${account.kv[0]?.id}"`, 'm'))
  assert.doesNotMatch(toml, new RegExp(`${D1_PLACEHOLDER}|"${KV_PLACEHOLDER}"`))
  assert.deepEqual(
    account.queues.map((queue) => queue.queue_name),
    QUEUES,
  )
  assert.equal(
    account.queues.find((queue) => queue.queue_name === 'notify-dlq')?.settings.message_retention_period,
    14 * 24 * 3600,
  )
  assert.deepEqual(account.migrations[account.d1[0]?.uuid as string], migrationFiles())
  assert.equal(account.worker?.deployments, 1)
  assert.equal(account.worker?.draft, false)
})

test('a second run on the same account creates nothing and deploys again', () => {
  const toml = fresh.wranglerToml()
  const run = fresh.deploy()
  assert.equal(run.status, 0, run.output)
  const account = fresh.account()
  assert.deepEqual(changes(account, firstRunCalls), [
    'queues update notify-dlq --message-retention-period-secs 1209600',
    'd1 migrations apply notify-edge --remote',
    'deploy',
  ])
  assert.equal(fresh.wranglerToml(), toml)
  assert.deepEqual([account.d1.length, account.kv.length, account.queues.length], [1, 1, 4])
  assert.equal(account.worker?.deployments, 2)
})

test('a fresh checkout on an account that has everything takes its ids and creates nothing', () => {
  const existing = fresh.account()
  const checkout = project()
  checkout.setAccount({ ...existing, calls: [] })
  const run = checkout.deploy()
  assert.equal(run.status, 0, run.output)
  const account = checkout.account()
  assert.deepEqual(changes(account), [
    'queues update notify-dlq --message-retention-period-secs 1209600',
    'd1 migrations apply notify-edge --remote',
    'deploy',
  ])
  assert.match(checkout.wranglerToml(), new RegExp(`^database_id = "${existing.d1[0]?.uuid}"`, 'm'))
  assert.match(checkout.wranglerToml(), new RegExp(`^id = "${existing.kv[0]?.id}"`, 'm'))
})

test('an id in wrangler.toml that the account does not have stops it, naming both ids', () => {
  const existing = fresh.account()
  const stray = project()
  stray.setAccount({ ...existing, calls: [] })
  const other = '11111111-2222-4333-8444-555555555555'
  writeFileSync(join(stray.dir, 'wrangler.toml'), stray.wranglerToml().replace(D1_PLACEHOLDER, other))
  const run = stray.deploy()
  assert.equal(run.status, 1, run.output)
  assert.match(run.output, new RegExp(`database_id ${other}, which this account does not have`))
  assert.match(run.output, new RegExp(`its database "notify-edge" is ${existing.d1[0]?.uuid}`))
  assert.deepEqual(changes(stray.account()), [])
})

// Resend named anywhere: alone, or behind cloudflare among EMAIL_TRANSPORTS (a standby it may fail over to).
for (const [how, vars] of [
  ['EMAIL_TRANSPORT = "resend"', 'EMAIL_TRANSPORT = "resend"'],
  [
    'EMAIL_TRANSPORTS naming resend behind cloudflare',
    'EMAIL_TRANSPORT = "cloudflare"\nEMAIL_TRANSPORTS = "cloudflare, resend"',
  ],
] as const) {
  test(`with ${how}, the Resend API key and webhook secret are required too`, () => {
    const before = fresh.account().worker?.deployments
    const toml = fresh.wranglerToml()
    writeFileSync(join(fresh.dir, 'wrangler.toml'), toml.replace('EMAIL_TRANSPORT = "cloudflare"', vars))
    try {
      const run = fresh.deploy()
      assert.equal(run.status, 1, run.output)
      assert.match(
        run.output,
        /npx wrangler secret put RESEND_API_KEY\n\s*npx wrangler secret put RESEND_WEBHOOK_SECRET\n/,
      )
      assert.doesNotMatch(run.output, /secret put INGEST_TOKEN/)
      assert.equal(fresh.account().worker?.deployments, before)
    } finally {
      writeFileSync(join(fresh.dir, 'wrangler.toml'), toml)
    }
  })
}

test('with a second D1 shard (DB_1), its database is created, its id written and its migrations applied too', () => {
  const sharded = project()
  for (const secret of SECRETS) {
    const put = sharded.wrangler(['secret', 'put', secret], `value-of-${secret}-0123456789abcdef0123456789`)
    assert.equal(put.status, 0, String(put.stderr))
  }
  const placeholder = placeholderShardId(1)
  writeFileSync(
    join(sharded.dir, 'wrangler.toml'),
    sharded
      .wranglerToml()
      .replace('[vars]\n', '[vars]\nDB_SHARDS = "2"\n')
      .concat(
        `\n[[d1_databases]]\nbinding = "DB_1"\ndatabase_name = "notify-edge-1"\ndatabase_id = "${placeholder}"\nmigrations_dir = "migrations/d1"\n`,
      ),
  )
  const run = sharded.deploy()
  assert.equal(run.status, 0, run.output)
  const account = sharded.account()
  const made = changes(account)
  assert.deepEqual(
    made.filter((call) => call.startsWith('d1 ')),
    [
      'd1 create notify-edge',
      'd1 create notify-edge-1',
      'd1 migrations apply notify-edge --remote',
      'd1 migrations apply notify-edge-1 --remote',
    ],
  )
  const shard = account.d1.find((db) => db.name === 'notify-edge-1')
  assert.ok(shard)
  assert.match(sharded.wranglerToml(), new RegExp(`database_id = "${shard.uuid}"`))
  assert.doesNotMatch(sharded.wranglerToml(), new RegExp(placeholder))
  assert.deepEqual(account.migrations[shard.uuid], migrationFiles())
  assert.equal(account.worker?.deployments, 1)
})
