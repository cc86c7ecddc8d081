/**
 * The operators' command line against a real `wrangler dev` (local D1, KV,
 * Queues and email), on a port and state directory of its own.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { promisify } from 'node:util'

const run = promisify(execFile)
const ADMIN = 'cli-test-admin-token-0123456789'
const INGEST = 'cli-test-ingest-token-0123456789'
const PORT = 18_787 + Math.floor(Math.random() * 1000)
const URL_BASE = `http://127.0.0.1:${PORT}`
const quiet = { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', CI: 'true' }
const state = mkdtempSync(join(tmpdir(), 'notify-edge-cli-'))
let worker: ChildProcess | undefined
let output = ''

async function waitFor<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  while (Date.now() < deadline) {
    try {
      const value = await check()
      if (value !== undefined) return value
    } catch (error) {
      last = error
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(`timed out waiting for ${what}: ${String(last ?? '')}\n${output.slice(-2000)}`)
}

async function api(method: string, path: string, token: string, body?: unknown) {
  const response = await fetch(`${URL_BASE}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

async function cli(...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ['bin/notify-edge.ts', ...args], {
    env: { ...process.env, NOTIFY_EDGE_URL: URL_BASE, NOTIFY_EDGE_TOKEN: ADMIN },
  })
  return stdout
}

before(async () => {
  await run('npx', ['wrangler', 'd1', 'migrations', 'apply', 'DB', '--local', '--persist-to', state], { env: quiet })
  worker = spawn(
    'npx',
    [
      'wrangler',
      'dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(PORT),
      '--persist-to',
      state,
      '--var',
      `ADMIN_TOKEN:${ADMIN}`,
      '--var',
      `INGEST_TOKEN:${INGEST}`,
      '--var',
      'DEFAULT_LOCALE:kk',
      '--show-interactive-dev-session=false',
    ],
    { env: quiet, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  )
  worker.stdout?.on('data', (chunk) => {
    output += chunk
  })
  worker.stderr?.on('data', (chunk) => {
    output += chunk
  })
  await waitFor(async () => ((await fetch(`${URL_BASE}/healthz`)).ok ? true : undefined), 'wrangler dev')
})

after(() => {
  if (worker?.pid) process.kill(-worker.pid, 'SIGTERM')
  rmSync(state, { recursive: true, force: true })
})

test('dlq list shows a dead-lettered event; replay after its cause is fixed sends the email; events show tells the story', async () => {
  const owner = crypto.randomUUID()
  const eventId = crypto.randomUUID()
  assert.equal(
    (await api('PUT', `/v1/contacts/${owner}`, ADMIN, { email: 'kazakh.owner@example.com', locale: 'kk' })).status,
    200,
  )
  const payload = { RequestId: crypto.randomUUID(), PersonId: crypto.randomUUID(), UserId: owner, Decision: 'approved' }
  const event = {
    source: 'kafka',
    origin: 'kafka:pin.profile.verification-requests.v1/0@1',
    sourceMessageId: eventId,
    receivedAt: new Date().toISOString(),
    headers: { 'message-id': eventId, 'event-type': 'verification-completed', 'contract-version': '1' },
    body: JSON.stringify(payload),
  }
  assert.equal((await api('POST', '/v1/ingest', INGEST, { events: [event] })).status, 202)

  // No template for kk (and DEFAULT_LOCALE is kk here): a dead letter the CLI lists.
  const listed = await waitFor(async () => {
    const items = JSON.parse(await cli('dlq', 'list', '--code', 'NTF_TEMPLATE_NOT_RESOLVED', '--json')) as {
      id: string
      eventId: string
    }[]
    return items.find((item) => item.eventId === eventId)
  }, 'the dead letter')
  const table = await cli('dlq', 'list', '--status', 'open')
  assert.match(table, /ID\s+STATUS\s+QUEUE\s+CODE/)
  assert.match(table, /NTF_TEMPLATE_NOT_RESOLVED/)
  assert.match(await cli('dlq', 'show', listed.id), /no active template for \(VerificationApproved, kk/)
  assert.match(await cli('events', 'show', eventId), /dead letters:[\s\S]*NTF_TEMPLATE_NOT_RESOLVED/)
  const dry = JSON.parse(
    await cli('dlq', 'replay', '--filter', '--code', 'NTF_TEMPLATE_NOT_RESOLVED', '--dry-run', '--json'),
  )
  assert.equal(dry.dryRun, true)
  assert.ok(dry.matched.some((item: { id: string }) => item.id === listed.id))

  // Fix the cause, replay, and the email goes out.
  const saved = await api('PUT', '/v1/templates/VerificationApproved/kk/email', ADMIN, {
    subject: 'Верификация өтті',
    textBody: 'Сәлем!',
    htmlBody: '<p>Сәлем!</p>',
  })
  assert.equal(saved.status, 200)
  assert.match(await cli('dlq', 'replay', listed.id), new RegExp(`replayed ${listed.id}`))
  const email = await waitFor(async () => {
    const response = await fetch(`${URL_BASE}/cdn-cgi/local/explorer/api/local/email/sending`)
    const body = (await response.json()) as { result: { to: string[]; subject: string }[] }
    return body.result.find((mail) => mail.to.includes('kazakh.owner@example.com'))
  }, 'the email')
  assert.equal(email.subject, 'Верификация өтті')

  const story = await waitFor(async () => {
    const json = JSON.parse(await cli('events', 'show', eventId, '--json'))
    return json.notifications[0]?.status === 'sent' ? json : undefined
  }, 'the sent notification')
  assert.equal(story.processed[0].outcome, 'enqueued')
  assert.equal(story.deadLetters[0].status, 'replayed')
  const text = await cli('events', 'show', eventId)
  assert.match(text, /notifications:[\s\S]*VerificationApproved\s+email\s+\S+\s+sent/)

  // Discard needs a reason; with one it is recorded.
  await assert.rejects(cli('dlq', 'discard', listed.id), /--reason/)
  assert.match(await cli('dlq', 'discard', listed.id, '--reason', 'replayed and delivered'), /discarded/)
  assert.equal(JSON.parse(await cli('dlq', 'show', listed.id, '--json')).status, 'discarded')
})

test('secrets stay out of git: .dev.vars and .env are ignored, their examples are not', async () => {
  const ignored = await run('git', ['check-ignore', '.dev.vars', '.env'])
  assert.deepEqual(ignored.stdout.trim().split('\n'), ['.dev.vars', '.env'])
  await assert.rejects(run('git', ['check-ignore', '.dev.vars.example', '.env.example']))
})
