/**
 * `npm start`: the whole dispatcher on this machine — the Worker (`wrangler dev`:
 * local D1, KV, Queues and email on 127.0.0.1:8787, its cron run every minute)
 * and the bridge (sources from .env), in one log stream with a prefix per part. Creates .dev.vars and .env
 * from their examples when missing, makes the local services available
 * (`services:up`) and applies the migrations. A service that cannot be had is
 * reported; the bridge keeps retrying its source.
 *
 * `npm start -- --resend` sends through the resend transport instead of the
 * local send_email binding, to a stand-in for Resend's API on this machine
 * (support/provider-fake.ts: Resend's documented contract and rate limit),
 * which posts each accepted email's signed `email.sent` and `email.delivered`
 * webhooks back to the Worker as Resend would.
 *
 * `npm start -- --failover` (with or without `--resend`, which it implies)
 * runs the Worker with EMAIL_TRANSPORTS = resend,cloudflare: mail goes through
 * the stand-in for Resend and fails over to the local send_email binding when
 * the stand-in refuses (docs/operating.md, "Provider failover"). With either,
 * the stand-in's control answers on 127.0.0.1:8790 (STAND_IN_CONTROL_PORT):
 * `GET /` its state, `POST /fault` with `key-revoked` (403 invalid_api_key),
 * `quota` (429 daily_quota_exceeded), `outage` (500 for every request) or
 * `none` as the body — what `npm run demo` uses to show a failover.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { createInterface } from 'node:readline'
import { parseEnv } from 'node:util'
import { redactPaths } from '../src/api/loggable-path.ts'
import { startInboxHost } from '../support/inbox-host.ts'
import { startProviderFake } from '../support/provider-fake.ts'
import { STAND_IN_CONTROL_PORT, STAND_IN_FAULTS, type StandInFault, type StandInState } from './demo-failover.ts'
import { DEMO_PAGE_PORT } from './demo-inbox.ts'

const quiet = { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' }
const colors = { worker: '\x1b[36m', bridge: '\x1b[35m', start: '\x1b[33m' } as const
const reset = '\x1b[0m'

function say(part: keyof typeof colors, line: string): void {
  process.stdout.write(`${colors[part]}[${part}]${reset} ${line}\n`)
}

for (const [file, example] of [
  ['.dev.vars', '.dev.vars.example'],
  ['.env', '.env.example'],
] as const) {
  if (!existsSync(file)) {
    copyFileSync(example, file)
    say('start', `created ${file} from ${example}`)
    continue
  }
  // A file made by an older version lacks the variables added since: they come from the example,
  // and the values already there stay as they are.
  const have = parseEnv(readFileSync(file, 'utf8'))
  const added = Object.entries(parseEnv(readFileSync(example, 'utf8'))).filter(([name]) => !(name in have))
  if (added.length > 0) {
    const text = readFileSync(file, 'utf8')
    const lines = added.map(([name, value]) => `${name}=${value}`).join('\n')
    writeFileSync(file, `${text}${text.endsWith('\n') || text === '' ? '' : '\n'}# added from ${example}\n${lines}\n`)
    say('start', `added ${added.map(([name]) => name).join(', ')} to ${file} from ${example}`)
  }
}
const env = parseEnv(readFileSync('.env', 'utf8')) as Record<string, string>

function step(label: string, command: string, args: string[], fatal: boolean): void {
  say('start', label)
  const result = spawnSync(command, args, { env: { ...quiet, ...env }, stdio: ['ignore', 'inherit', 'inherit'] })
  if (result.status !== 0) {
    if (fatal) process.exit(result.status ?? 1)
    say('start', `${label} did not succeed; continuing (the bridge retries its sources)`)
  }
}

step('services: PostgreSQL, RabbitMQ, Kafka', 'bash', ['scripts/services-up.sh'], false)
if (env.PG_URL) step('PostgreSQL outbox migration', process.execPath, ['bridge/src/migrate.ts'], false)
step('D1 migrations (every shard)', process.execPath, ['scripts/migrate.ts'], true)

const children: ChildProcess[] = []
function run(part: 'worker' | 'bridge', command: string, args: string[], extraEnv: Record<string, string>): void {
  const child = spawn(command, args, { env: { ...quiet, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  for (const stream of [child.stdout, child.stderr]) {
    // wrangler dev prints every request's path: unsubscribe tokens and suppressed addresses are cut out.
    if (stream) createInterface({ input: stream }).on('line', (line) => say(part, redactPaths(line)))
  }
  child.on('exit', (code, signal) => {
    say(part, `exited (${signal ?? code})`)
    shutdown(code ?? 1)
  })
}

const resendVars: string[] = []
const failover = process.argv.includes('--failover')
if (process.argv.includes('--resend') || failover) {
  const secret = parseEnv(readFileSync('.dev.vars', 'utf8')).RESEND_WEBHOOK_SECRET
  if (!secret) {
    say('start', '--resend needs RESEND_WEBHOOK_SECRET in .dev.vars (the stand-in signs its webhooks with it)')
    process.exit(2)
  }
  const apiKey = 're_local_stand_in'
  const provider = await startProviderFake({
    failureRate: 0,
    apiKey,
    webhook: { url: 'http://127.0.0.1:8787/v1/webhooks/resend', secret },
  })
  const transports = failover ? ['resend', 'cloudflare'] : ['resend']
  for (const [name, value] of Object.entries({
    // With two, EMAIL_TRANSPORTS decides; EMAIL_TRANSPORT names the first all the same, so that the
    // doctor and the console, which read the pause of EMAIL_TRANSPORT, show the stand-in's.
    EMAIL_TRANSPORT: 'resend',
    ...(failover ? { EMAIL_TRANSPORTS: transports.join(',') } : {}),
    RESEND_API_URL: provider.url,
    RESEND_API_KEY: apiKey,
  }))
    resendVars.push('--var', `${name}:${value}`)
  await serveStandInControl(provider, transports)
  say(
    'start',
    failover
      ? `EMAIL_TRANSPORTS=resend,cloudflare: the resend transport, to a stand-in for Resend's API on ${provider.url}, fails over to the local send_email binding; the stand-in's faults: http://127.0.0.1:${STAND_IN_CONTROL_PORT}`
      : `resend transport, to a stand-in for Resend's API on ${provider.url} (its webhooks come back signed)`,
  )
}

/**
 * The stand-in's control: `GET /` answers its state (the Worker's transports, the fault, the emails it
 * took), `POST /fault` sets the fault named by the body. Only on 127.0.0.1.
 */
async function serveStandInControl(
  provider: Awaited<ReturnType<typeof startProviderFake>>,
  transports: string[],
): Promise<void> {
  let fault: StandInFault = 'none'
  const server = createServer(async (request, response) => {
    let body = ''
    for await (const chunk of request) body += chunk
    if (request.method === 'POST' && request.url === '/fault') {
      const wanted = body.trim() as StandInFault
      if (!STAND_IN_FAULTS.includes(wanted)) {
        response.writeHead(400, { 'content-type': 'text/plain' }).end(`one of ${STAND_IN_FAULTS.join(', ')}`)
        return
      }
      fault = wanted
      provider.setKeyRevoked(fault === 'key-revoked')
      provider.setQuotaExceeded(fault === 'quota')
      provider.setOutage(fault === 'outage')
      say('start', `the stand-in for Resend: ${fault === 'none' ? 'no fault' : fault}`)
    } else if (request.method !== 'GET' || request.url !== '/') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('GET / or POST /fault')
      return
    }
    const state: StandInState = { transports, fault, accepted: provider.emails.size }
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(state))
  })
  server.listen(STAND_IN_CONTROL_PORT, '127.0.0.1')
  await once(server, 'listening')
  server.unref()
}

// wrangler itself, not through npx, so that SIGTERM reaches it (and it stops workerd).
run(
  'worker',
  'wrangler',
  [
    'dev',
    '--ip',
    '127.0.0.1',
    '--port',
    '8787',
    '--show-interactive-dev-session=false',
    '--test-scheduled',
    ...resendVars,
  ],
  {},
)
runCronEveryMinute('http://127.0.0.1:8787')
run('bridge', process.execPath, ['bridge/src/main.ts'], env)
// The demo page: a host application's page with the inbox element, signing its users' tokens with the
// INBOX_TOKEN_SECRET of .dev.vars (INBOX_ALLOWED_ORIGINS there lists it).
const inboxSecret = parseEnv(readFileSync('.dev.vars', 'utf8')).INBOX_TOKEN_SECRET
if (inboxSecret) {
  await startInboxHost({ workerUrl: 'http://127.0.0.1:8787', secret: inboxSecret, port: DEMO_PAGE_PORT })
  say('start', `inbox demo page: http://127.0.0.1:${DEMO_PAGE_PORT}/?user=<a user id> (npm run demo names one)`)
}
say(
  'start',
  'Worker on http://127.0.0.1:8787, bridge health on http://127.0.0.1:' +
    (env.HTTP_PORT ?? '8788') +
    '/readyz; Ctrl-C stops both',
)

/**
 * Cloudflare runs the Worker's cron every minute; `wrangler dev` never runs
 * it by itself. Here it runs as deployed — the stuck search, the paused
 * transport's probe, retention, and the buckets the console's charts read —
 * a second past each minute, through wrangler's `/__scheduled` route.
 */
function runCronEveryMinute(workerUrl: string): void {
  let failing = false
  const tick = async () => {
    try {
      const response = await fetch(`${workerUrl}/__scheduled?cron=${encodeURIComponent('* * * * *')}`)
      await response.body?.cancel()
      if (!response.ok) throw new Error(`answered ${response.status}`)
      if (failing) say('start', 'the cron runs again')
      failing = false
    } catch (error) {
      // The Worker may still be starting: said once, tried again next minute.
      if (!failing)
        say('start', `the cron did not run (${error instanceof Error ? error.message : error}); next minute again`)
      failing = true
    }
    setTimeout(tick, 60_000 - (Date.now() % 60_000) + 1000).unref()
  }
  setTimeout(tick, 60_000 - (Date.now() % 60_000) + 1000).unref()
}

let stopping = false
function shutdown(code: number): void {
  if (stopping) return
  stopping = true
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM')
  setTimeout(() => process.exit(code), 12_000).unref()
  Promise.all(
    children.map((child) => (child.exitCode === null ? new Promise((r) => child.once('exit', r)) : null)),
  ).then(() => process.exit(code))
}
process.on('SIGINT', () => shutdown(0))
process.on('SIGTERM', () => shutdown(0))
