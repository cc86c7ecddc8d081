/**
 * `npx notify-edge doctor`: the local wrangler.toml judged by the same rules
 * as the Worker's GET /v1/health/config — the repository's own names its
 * placeholder sender domain and ids and exits 1, one made ready to deploy
 * exits 0 — and, with NOTIFY_EDGE_URL and NOTIFY_EDGE_TOKEN, the deployed
 * Worker's findings beside them (here a `wrangler dev`).
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { promisify } from 'node:util'
import type { Finding } from '../../src/health/findings.ts'
import { assertNoLeaks, watchOutput } from '../../support/child-output.ts'
import { type LocalWorker, startLocalWorker } from '../../support/local-worker.ts'

const run = promisify(execFile)
const ADMIN = 'doctor-test-admin-token-0123456789'
const INGEST = 'doctor-test-ingest-token-0123456789'
const scratch = mkdtempSync(join(tmpdir(), 'notify-edge-doctor-'))
let worker: LocalWorker

let printed = ''
watchOutput('the doctor', () => printed)

type Reports = { reports: { source: string; findings: Finding[] }[]; blockers: number }

/** Runs the doctor; its exit code and what it printed. No Worker is asked unless `environment` says where. */
async function doctor(args: string[], environment: Record<string, string> = {}) {
  const env = { ...process.env, NOTIFY_EDGE_URL: '', NOTIFY_EDGE_TOKEN: '', ...environment }
  try {
    const { stdout } = await run(process.execPath, ['bin/notify-edge.ts', 'doctor', ...args], { env })
    printed += stdout
    return { code: 0, stdout }
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string }
    printed += failed.stdout + failed.stderr
    return { code: failed.code, stdout: failed.stdout }
  }
}

/** The repository's wrangler.toml with `edit` applied, written to the scratch directory. */
function wranglerToml(name: string, edit: (toml: string) => string): string {
  const path = join(scratch, name)
  writeFileSync(path, edit(readFileSync('wrangler.toml', 'utf8')))
  return path
}

const ready = (toml: string) =>
  toml
    .replace('notifications@notify-edge.example', 'notifications@mail.arthunt-notify.dev')
    .replace('https://notify-edge.example.workers.dev', 'https://notify.arthunt-notify.dev')
    .replace('00000000-0000-4000-8000-000000000001', '3f1c2b7e-9d4a-4c1e-8b6f-2a5d7e9c0b13')
    .replace('00000000000000000000000000000001', '9b2e4f6a8c0d1e3f5a7b9c1d3e5f7a9b')

const idsOf = (findings: Finding[], severity?: Finding['severity']) =>
  findings.filter((finding) => !severity || finding.severity === severity).map((finding) => finding.id)

before(async () => {
  worker = await startLocalWorker({ ADMIN_TOKEN: ADMIN, INGEST_TOKEN: INGEST })
})

after(async () => {
  await worker?.stop()
  rmSync(scratch, { recursive: true, force: true })
  assertNoLeaks()
})

test("against the repository's wrangler.toml it names the placeholder sender domain, with its fix, and exits 1", async () => {
  const text = await doctor([])
  assert.equal(text.code, 1)
  assert.match(text.stdout, /BLOCKER\s+sender-placeholder\n\s+EMAIL_FROM is on notify-edge\.example, a name reserved/)
  assert.match(text.stdout, /fix: set EMAIL_FROM in wrangler\.toml to an address on a domain onboarded/)
  assert.match(text.stdout, /set NOTIFY_EDGE_URL and NOTIFY_EDGE_TOKEN to ask the deployed Worker/)

  const json = await doctor(['--json'])
  assert.equal(json.code, 1)
  const { reports } = JSON.parse(json.stdout) as Reports
  assert.equal(reports.length, 1)
  const findings = reports[0]?.findings ?? []
  assert.deepEqual(idsOf(findings, 'blocker'), ['sender-placeholder'])
  // npm run deploy replaces the placeholder ids itself: worth knowing, not in the way.
  assert.ok(idsOf(findings, 'info').includes('resources-placeholder'))
  assert.deepEqual(idsOf(findings, 'warning'), ['public-url-placeholder'])
})

test('a wrangler.toml made ready to deploy has no blocker and exits 0', async () => {
  const { code, stdout } = await doctor(['--config', wranglerToml('ready.toml', ready), '--json'])
  assert.equal(code, 0)
  const findings = (JSON.parse(stdout) as Reports).reports[0]?.findings ?? []
  assert.deepEqual(idsOf(findings, 'blocker'), [])
  assert.deepEqual(idsOf(findings, 'warning'), [])
})

test('one without its cron, a consumer and a binding, with a bad variable and a secret in [vars], says each', async () => {
  const broken = wranglerToml('broken.toml', (toml) =>
    ready(toml)
      .replace('crons = ["* * * * *"]', 'crons = []')
      .replace(/\[\[queues\.consumers\]\]\nqueue = "notify-dlq"/, '[[queues.consumers]]\nqueue = "notify-other"')
      .replace('[[queues.producers]]\nbinding = "DLQ"', '[[queues.producers]]\nbinding = "DEAD_LETTERS"')
      .replace(
        'DISPATCH_LEASE_SECONDS = "120"',
        'DISPATCH_LEASE_SECONDS = "1"\nADMIN_TOKEN = "committed-admin-token-0123456789"',
      ),
  )
  const { code, stdout } = await doctor(['--config', broken, '--json'])
  assert.equal(code, 1)
  const findings = (JSON.parse(stdout) as Reports).reports[0]?.findings ?? []
  const byId = new Map(findings.map((finding) => [finding.id, finding]))
  assert.deepEqual(idsOf(findings, 'blocker').sort(), [
    'bindings-missing',
    'config-invalid',
    'cron-missing',
    'queue-consumers-missing',
  ])
  assert.match(byId.get('config-invalid')?.message ?? '', /DISPATCH_LEASE_SECONDS/)
  assert.match(byId.get('bindings-missing')?.message ?? '', /not bound: DLQ/)
  assert.match(byId.get('queue-consumers-missing')?.message ?? '', /notify-dlq/)
  assert.match(byId.get('secrets-in-vars')?.fix ?? '', /npx wrangler secret put ADMIN_TOKEN/)
  assert.doesNotMatch(stdout, /committed-admin-token/)
})

test('two shards of notify-events without the second one bound or consumed: each is named with the block to add', async () => {
  const half = wranglerToml('half-sharded.toml', (toml) =>
    ready(toml).replace('LOG_LEVEL = "info"', 'LOG_LEVEL = "info"\nEVENTS_QUEUE_SHARDS = "2"'),
  )
  const { code, stdout } = await doctor(['--config', half, '--json'])
  assert.equal(code, 1)
  const findings = (JSON.parse(stdout) as Reports).reports[0]?.findings ?? []
  const byId = new Map(findings.map((finding) => [finding.id, finding]))
  assert.deepEqual(idsOf(findings, 'blocker').sort(), ['bindings-missing', 'queue-consumers-missing'])
  assert.match(byId.get('bindings-missing')?.message ?? '', /not bound: EVENTS_1;/)
  assert.match(byId.get('bindings-missing')?.fix ?? '', /binding = "EVENTS_1", queue = "notify-events-1"/)
  assert.match(byId.get('queue-consumers-missing')?.message ?? '', /no consumer for notify-events-1:/)

  const whole = wranglerToml(
    'sharded.toml',
    (toml) =>
      `${ready(toml).replace('LOG_LEVEL = "info"', 'LOG_LEVEL = "info"\nEVENTS_QUEUE_SHARDS = "2"')}
[[queues.producers]]
binding = "EVENTS_1"
queue = "notify-events-1"

[[queues.consumers]]
queue = "notify-events-1"
max_batch_size = 100
max_batch_timeout = 0.1
max_retries = 3
retry_delay = 5
max_concurrency = 4
dead_letter_queue = "notify-dlq"
`,
  )
  const sharded = await doctor(['--config', whole, '--json'])
  assert.deepEqual(idsOf((JSON.parse(sharded.stdout) as Reports).reports[0]?.findings ?? [], 'blocker'), [])
  assert.equal(sharded.code, 0)
})

test("with NOTIFY_EDGE_URL and NOTIFY_EDGE_TOKEN it shows the deployed Worker's findings too", async () => {
  const { code, stdout } = await doctor([], { NOTIFY_EDGE_URL: worker.url, NOTIFY_EDGE_TOKEN: ADMIN })
  assert.equal(code, 1)
  const [, remote = ''] = stdout.split(`the Worker at ${worker.url}:`)
  // What only the Worker knows: its cron has not run (wrangler dev runs none by itself).
  assert.match(remote, /BLOCKER\s+cron-stale\n\s+the maintenance cron has never run/)
  assert.match(remote, /BLOCKER\s+sender-placeholder/)
  assert.doesNotMatch(stdout, /ask the deployed Worker too/)

  const refused = await doctor(['--json'], { NOTIFY_EDGE_URL: worker.url, NOTIFY_EDGE_TOKEN: INGEST })
  const { reports } = JSON.parse(refused.stdout) as Reports
  assert.deepEqual(
    reports[1]?.findings.map((finding) => [finding.id, finding.severity]),
    [['worker-unreachable', 'warning']],
  )
  assert.match(reports[1]?.findings[0]?.message ?? '', /403 FORBIDDEN/)
})

test('two D1 shards without the second one bound: it is named with the block to add, and bound it passes', async () => {
  const counted = (toml: string) => ready(toml).replace('LOG_LEVEL = "info"', 'LOG_LEVEL = "info"\nDB_SHARDS = "2"')
  const half = wranglerToml('half-sharded-d1.toml', counted)
  const { code, stdout } = await doctor(['--config', half, '--json'])
  assert.equal(code, 1)
  const findings = (JSON.parse(stdout) as Reports).reports[0]?.findings ?? []
  const missing = findings.find((finding) => finding.id === 'bindings-missing')
  assert.match(missing?.message ?? '', /not bound: DB_1;/)
  assert.match(missing?.fix ?? '', /\[\[d1_databases\]\] binding = "DB_1", database_name = "notify-edge-1"/)

  const whole = wranglerToml(
    'sharded-d1.toml',
    (toml) => `${counted(toml)}
[[d1_databases]]
binding = "DB_1"
database_name = "notify-edge-1"
database_id = "00000000-0000-4000-8000-100000000001"
migrations_dir = "migrations/d1"
`,
  )
  const sharded = await doctor(['--config', whole, '--json'])
  const blockers = idsOf((JSON.parse(sharded.stdout) as Reports).reports[0]?.findings ?? [], 'blocker')
  assert.deepEqual(blockers, [])
  assert.equal(sharded.code, 0)
})
