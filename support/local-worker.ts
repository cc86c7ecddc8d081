/**
 * A `wrangler dev` of its own — its own port, state directory and variables —
 * for the Node-side tests, the benchmark and the chaos harness.
 */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import PostalMime from 'postal-mime'
import { redactPaths } from '../src/api/loggable-path.ts'
import { watchOutput } from './child-output.ts'
import { type OpenApiDocument, openApiChecker } from './openapi-check.ts'
import { freePort, waitFor } from './wait.ts'

const run = promisify(execFile)

/** Tries of a harness's read of the local database before its failure is the harness's. */
const QUERY_ATTEMPTS = 5

/** A running local Worker. */
export type LocalWorker = {
  url: string
  port: number
  /** Its state directory (`--persist-to`): the local D1's SQLite file is under it. */
  state: string
  output: () => string
  /** The process group of wrangler and its workerd (to read their CPU time from /proc). */
  processGroup: number
  /** Runs the cron trigger once (needs `cron: true`), as at `at` when given (the cron's clock; the Worker's own stays now). */
  runCron: (at?: Date) => Promise<void>
  /**
   * Reads its local D1 with SQL (`wrangler d1 execute --local`): for a harness's reconciliation. `binding`
   * names the database, `DB` (the primary) unless given: a shard is `DB_1`, … (docs/scaling.md).
   */
  query: (sql: string, binding?: string) => Promise<Record<string, unknown>[]>
  stop: () => Promise<void>
  /** Kills it at once (for an `exit` handler: a harness that fails leaves nothing running). */
  kill: () => void
  /** `fetch` of a path of its API; throws when the answer does not match its /openapi.json. */
  request: (path: string, init?: RequestInit) => Promise<Response>
  /** A JSON call of its API with a bearer token (checked like `request`): the status and the parsed body. */
  api: (
    method: string,
    path: string,
    token: string,
    body?: unknown,
  ) => Promise<{ status: number; body: Record<string, unknown> }>
}

/**
 * Applies the D1 migrations to a fresh state directory, starts `wrangler dev`
 * with `vars` (each `--var NAME:value`), and resolves once `/healthz` answers.
 * With `cron`, the Worker's scheduled handler can be run on demand (`runCron()`),
 * as Cloudflare's cron trigger would; `wrangler dev` never runs it by itself.
 * `config` names another wrangler.toml (the bench's bare Worker);
 * `inspectorPort` opens the DevTools inspector there (the bench's CPU profile);
 * `databases`: the D1 bindings to migrate (DB alone by default).
 */
export async function startLocalWorker(
  vars: Record<string, string>,
  options: { cron?: boolean; config?: string; inspectorPort?: number; databases?: readonly string[] } = {},
): Promise<LocalWorker> {
  const port = await freePort()
  const state = mkdtempSync(join(tmpdir(), 'notify-edge-worker-'))
  const env = { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', CI: 'true' }
  const config = options.config ? ['--config', options.config] : []
  // Every D1 database the config binds that holds the schema (DB, and its shards: docs/scaling.md).
  for (const binding of options.databases ?? ['DB']) {
    execFileSync(
      'npx',
      ['wrangler', 'd1', 'migrations', 'apply', binding, '--local', '--persist-to', state, ...config],
      {
        env,
        stdio: 'ignore',
      },
    )
  }
  const args = [
    'wrangler',
    'dev',
    ...config,
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--persist-to',
    state,
    '--show-interactive-dev-session=false',
    ...(options.cron ? ['--test-scheduled'] : []),
    ...(options.inspectorPort ? ['--inspector-port', String(options.inspectorPort)] : []),
  ]
  // Secrets the Worker needs, for tests only; `vars` may override them.
  const all = {
    UNSUBSCRIBE_SIGNING_KEY: 'test-unsubscribe-signing-key-0123456789',
    RESEND_WEBHOOK_SECRET: 'whsec_dGVzdC1yZXNlbmQtd2ViaG9vay1zZWNyZXQ=',
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    // The harnesses read the exact message sent (the demo's unsubscribe, the CLI's --raw), as a local run
    // keeps it (.dev.vars.example); a deployment keeps none by default.
    SENT_MESSAGE_RETENTION_DAYS: '7',
    CONSOLE_SESSION_KEY: 'test-console-session-key-0123456789abcdef',
    INBOX_TOKEN_SECRET: 'test-inbox-token-secret-0123456789abcdef',
    // A digest closes two seconds after it opens: a test waits for a response's email as for any other.
    DIGEST_WINDOW_SECONDS: '2',
    // Quiet hours hold low urgency, as wrangler.toml says, whatever a local .dev.vars says (`npm start` writes
    // one that holds normal too, for the demo): wrangler dev reads that file beside these.
    QUIET_HOURS_URGENCIES: 'low',
    ...vars,
  }
  for (const [name, value] of Object.entries(all)) args.push('--var', `${name}:${value}`)
  let output = ''
  const child: ChildProcess = spawn('npx', args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  child.stdout?.on('data', (chunk) => {
    output += chunk
  })
  child.stderr?.on('data', (chunk) => {
    output += chunk
  })
  // Scanned as `npm start` shows it: wrangler's own request lines carry paths, which `npm start`
  // prints through redactPaths; everything else is scanned as printed.
  watchOutput(`wrangler dev ${port}`, () => redactPaths(output))
  const url = `http://127.0.0.1:${port}`
  let checker: ReturnType<typeof openApiChecker> | undefined
  await waitFor(async () => ((await fetch(`${url}/healthz`)).ok ? true : undefined), `wrangler dev on ${port}`, 120_000)
  const local: LocalWorker = {
    url,
    state,
    port,
    output: () => output,
    processGroup: child.pid as number,
    async request(path, init = {}) {
      const response = await fetch(`${url}${path}`, init)
      checker ??= openApiChecker((await (await fetch(`${url}/openapi.json`)).json()) as OpenApiDocument)
      const problems = checker.check({
        method: init.method ?? 'GET',
        path: new URL(path, url).pathname,
        status: response.status,
        contentType: response.headers.get('content-type'),
        body: await response.clone().text(),
      })
      if (problems.length > 0) throw new Error(`the answer does not match /openapi.json:\n${problems.join('\n')}`)
      return response
    },
    async api(method, path, token, body) {
      const response = await local.request(path, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      return { status: response.status, body: (await response.json()) as Record<string, unknown> }
    },
    async query(sql, binding = 'DB') {
      // A second process on the same local database (wrangler d1 execute beside wrangler dev) can
      // collide with the Worker's writes ("Failed to get session commit token"): a read is asked again.
      // A write is not: whether it was applied is not known.
      const reads = /^\s*(SELECT|WITH)\b/i.test(sql)
      for (let attempt = 1; ; attempt += 1) {
        try {
          // Not execFileSync: the harness's event loop runs on meanwhile (the chaos run's own PostgreSQL
          // transaction, which a database's idle_in_transaction_session_timeout ends when it waits too long).
          const { stdout: out } = await run(
            'npx',
            [
              'wrangler',
              'd1',
              'execute',
              binding,
              '--local',
              '--persist-to',
              state,
              ...config,
              '--json',
              '--command',
              sql,
            ],
            { env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
          )
          return ((JSON.parse(out) as { results: Record<string, unknown>[] }[])[0]?.results ?? []) as Record<
            string,
            unknown
          >[]
        } catch (error) {
          if (!reads || attempt >= QUERY_ATTEMPTS) throw error
          await new Promise((resolve) => setTimeout(resolve, 250 * attempt))
        }
      }
    },
    async runCron(at) {
      const cron = encodeURIComponent('* * * * *')
      // wrangler's /__scheduled passes the cron alone; miniflare's own trigger route takes the time as well.
      const response = await fetch(
        at ? `${url}/cdn-cgi/local/scheduled?cron=${cron}&time=${at.getTime()}` : `${url}/__scheduled?cron=${cron}`,
      )
      await response.text()
      if (!response.ok) throw new Error(`the cron trigger answered ${response.status}`)
    },
    kill() {
      if (child.pid && child.exitCode === null) {
        try {
          process.kill(-child.pid, 'SIGKILL')
        } catch {
          // already gone
        }
      }
      rmSync(state, { recursive: true, force: true })
    },
    async stop() {
      if (child.pid && child.exitCode === null) {
        process.kill(-child.pid, 'SIGTERM')
        await new Promise((resolve) => child.once('exit', resolve))
      }
      rmSync(state, { recursive: true, force: true })
    },
  }
  return local
}

/** One mail of wrangler's local list: the Message-ID the binding gave it, and when it was sent. */
export type LocalMail = { to: string[]; subject: string; messageId: string; sentAt: string }

/**
 * One mail the local `send_email` binding sent, with its text part (the list gives the raw message, which
 * is parsed here); undefined when not found.
 */
export async function sentMail(
  workerUrl: string,
  messageId: string,
): Promise<(LocalMail & { raw?: string; text: string }) | undefined> {
  const response = await fetch(
    `${workerUrl}/cdn-cgi/local/explorer/api/local/email/sending?email_id=${encodeURIComponent(messageId)}`,
  )
  if (!response.ok) return undefined
  const mail = ((await response.json()) as { result?: LocalMail & { raw?: string; text?: string } }).result
  if (!mail) return undefined
  const text = mail.text ?? (mail.raw ? ((await PostalMime.parse(mail.raw)).text ?? '') : '')
  return { ...mail, text }
}

/** Every mail the local `send_email` binding has sent, all pages (the list gives at most 100 at a time). */
export async function sentMails(workerUrl: string): Promise<LocalMail[]> {
  const mails: LocalMail[] = []
  let cursor: string | undefined
  do {
    const query = `per_page=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`
    const response = await fetch(`${workerUrl}/cdn-cgi/local/explorer/api/local/email/sending?${query}`)
    const page = (await response.json()) as {
      result: LocalMail[] | null
      result_info?: { has_more?: boolean; cursor?: string }
    }
    mails.push(...(page.result ?? []))
    cursor = page.result_info?.has_more ? page.result_info.cursor : undefined
  } while (cursor)
  return mails
}
