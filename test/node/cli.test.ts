/**
 * The operators' command line against a real `wrangler dev` (local D1, KV,
 * Queues and email), on a port and state directory of its own.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { after, before, test } from 'node:test'
import { promisify } from 'node:util'
import { assertNoLeaks, watchOutput } from '../../support/child-output.ts'
import { type LocalWorker, startLocalWorker } from '../../support/local-worker.ts'
import { waitFor } from '../../support/wait.ts'

const run = promisify(execFile)
const ADMIN = 'cli-test-admin-token-0123456789'
const INGEST = 'cli-test-ingest-token-0123456789'
let worker: LocalWorker
let URL_BASE = ''

const api = (method: string, path: string, token: string, body?: unknown) => worker.api(method, path, token, body)

let printed = ''
watchOutput('the CLI', () => printed)

async function cli(...args: string[]): Promise<string> {
  const { stdout, stderr } = await run(process.execPath, ['bin/notify-edge.ts', ...args], {
    env: { ...process.env, NOTIFY_EDGE_URL: URL_BASE, NOTIFY_EDGE_TOKEN: ADMIN },
  })
  printed += stdout + stderr
  return stdout
}

before(async () => {
  worker = await startLocalWorker({ ADMIN_TOKEN: ADMIN, INGEST_TOKEN: INGEST, DEFAULT_LOCALE: 'kk' })
  URL_BASE = worker.url
})

after(async () => {
  await worker?.stop()
  assertNoLeaks()
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
  const listed = await waitFor(
    async () => {
      const items = JSON.parse(await cli('dlq', 'list', '--code', 'NTF_TEMPLATE_NOT_RESOLVED', '--json')) as {
        id: string
        eventId: string
      }[]
      return items.find((item) => item.eventId === eventId)
    },
    'the dead letter',
    60_000,
  )
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
  const email = await waitFor(
    async () => {
      const response = await fetch(`${URL_BASE}/cdn-cgi/local/explorer/api/local/email/sending`)
      const body = (await response.json()) as { result: { to: string[]; subject: string }[] }
      return body.result.find((mail) => mail.to.includes('kazakh.owner@example.com'))
    },
    'the email',
    60_000,
  )
  assert.equal(email.subject, 'Верификация өтті')

  const story = await waitFor(
    async () => {
      const json = JSON.parse(await cli('events', 'show', eventId, '--json'))
      return json.notifications[0]?.status === 'sent' ? json : undefined
    },
    'the sent notification',
    60_000,
  )
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

/**
 * The suppression commands print addresses: that is what an operator asks them
 * for (a terminal, not a log). Their output is therefore not added to what the
 * leak check reads; everything else of this file is.
 */
async function cliShowingAddresses(...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ['bin/notify-edge.ts', ...args], {
    env: { ...process.env, NOTIFY_EDGE_URL: URL_BASE, NOTIFY_EDGE_TOKEN: ADMIN },
  })
  return stdout
}

test('suppressions add / list / show / remove, each in the audit trail; notifications show prints the delivery timeline, masked unless revealed (audited)', async () => {
  const address = `cli-suppressed-${crypto.randomUUID().slice(0, 8)}@example.com`
  assert.match(
    await cliShowingAddresses('suppressions', 'add', address, '--reason', 'asked not to be mailed'),
    /suppressed/,
  )
  const listed = JSON.parse(await cliShowingAddresses('suppressions', 'list', '--cause', 'operator', '--json')) as {
    address: string
    active: boolean
  }[]
  assert.deepEqual(
    listed.filter((entry) => entry.address === address).map((entry) => entry.active),
    [true],
  )
  assert.match(await cliShowingAddresses('suppressions', 'show', address), /operator .* yes/)
  await assert.rejects(cli('suppressions', 'add', address), /--reason/)
  assert.match(await cliShowingAddresses('suppressions', 'remove', address), /removed/)
  await assert.rejects(cliShowingAddresses('suppressions', 'show', address), /404 NOT_FOUND/)
  // Both changes are in the audit trail, as made through the CLI.
  const trail = JSON.parse(await cliShowingAddresses('audit', 'list', '--target', address, '--json')) as {
    action: string
    via: string
    actor: string
  }[]
  assert.deepEqual(
    trail.map((row) => [row.action, row.via, row.actor]),
    [
      ['suppression.delete', 'cli', 'admin token'],
      ['suppression.put', 'cli', 'admin token'],
    ],
  )
  assert.match(await cliShowingAddresses('audit', 'list', '--target', address), /suppression\.put/)

  // An event to that address, then its notification with its (still empty) delivery timeline.
  const sample = JSON.parse(await readFile('examples/arthunt/invitation.created.json', 'utf8'))
  sample.envelope.eventId = crypto.randomUUID()
  sample.data.recipient.email = address
  sample.data.recipient.userId = crypto.randomUUID()
  // This Worker's default locale is kk, which has no invitation template: the contact says ru.
  const contact = await api('PUT', `/v1/contacts/${sample.data.recipient.userId}`, ADMIN, {
    email: address,
    locale: 'ru',
  })
  assert.equal(contact.status, 200)
  const posted = await api('POST', '/v1/ingest', INGEST, {
    events: [
      {
        source: 'http',
        origin: 'cli-test',
        sourceMessageId: sample.envelope.eventId,
        receivedAt: new Date().toISOString(),
        headers: {},
        body: JSON.stringify(sample),
      },
    ],
  })
  assert.equal(posted.status, 202)
  const notification = await waitFor(async () => {
    const story = await api('GET', `/v1/events/${sample.envelope.eventId}`, ADMIN)
    const [first] = (story.body.notifications ?? []) as { id: string; status: string }[]
    return first?.status === 'sent' ? first : undefined
  }, 'the invitation sent')
  const shown = await cli('notifications', 'show', notification.id)
  assert.match(shown, /status +sent/)
  assert.match(shown, /delivery timeline:\nno provider events yet/)
  // Masked by default, and nothing recorded; --reveal and --raw show it, each one audit row.
  assert.match(shown, /recipientEmail +c\*\*\*@example\.com/)
  assert.ok(!shown.includes(address))
  const revealed = await cliShowingAddresses('notifications', 'show', notification.id, '--reveal')
  assert.ok(revealed.split('\n').some((line) => /^recipientEmail +/.test(line) && line.endsWith(address)))
  assert.match(revealed, /subject +Вас пригласили в проект/)
  const raw = await cliShowingAddresses('notifications', 'show', notification.id, '--raw')
  assert.match(raw, /^List-Unsubscribe: <http.*\/u\/v1\./m)
  const reads = JSON.parse(await cli('audit', 'list', '--target', notification.id, '--json')) as {
    action: string
    via: string
    actor: string
  }[]
  assert.deepEqual(
    reads.map((row) => [row.action, row.via, row.actor]),
    [
      ['notification.raw', 'cli', 'admin token'],
      ['notification.reveal', 'cli', 'admin token'],
    ],
  )
  assert.match(await cli('events', 'show', sample.envelope.eventId), /DELIVERY/)
})

test('erase by user id or by address prints the rows erased per table and the audit name, never the address', async () => {
  const userId = crypto.randomUUID()
  const address = `cli-erased-${crypto.randomUUID().slice(0, 8)}@example.com`
  assert.equal((await api('PUT', `/v1/contacts/${userId}`, ADMIN, { email: address })).status, 200)
  const table = await cli('erase', '--user-id', userId)
  assert.match(table, new RegExp(`the audit trail names the recipient ${userId}`))
  assert.match(table, /contacts\s+1/)
  assert.equal((await api('GET', `/v1/contacts/${userId}`, ADMIN)).status, 404)
  // Nothing is left under that address: an erasure by address finds nothing, and says how the trail would name it.
  const again = JSON.parse(await cli('erase', '--address', address, '--json')) as {
    target: string
    erased: Record<string, number>
  }
  assert.match(again.target, /^hmac:[0-9a-f]{64}$/)
  assert.ok(Object.values(again.erased).every((count) => count === 0))
  await assert.rejects(cli('erase'), /--user-id <id> or --address <address>/)
  const trail = JSON.parse(await cli('audit', 'list', '--action', 'recipient.erase', '--target', userId, '--json')) as {
    via: string
    affected: number
  }[]
  assert.deepEqual(
    trail.map((row) => [row.via, row.affected]),
    [['cli', 1]],
  )
})

test('cancel <key> before its event: the event creates nothing; cancel --filter --dry-run lists a waiting key and changes nothing', async () => {
  const invitationId = crypto.randomUUID()
  const key = `invitation:${invitationId}`
  const first = await cli('cancel', key, '--reason', 'withdrawn by the client')
  assert.match(first, new RegExp(`cancelled ${key} \\(first at .+, by api\\); no notification of it yet`))
  const example = JSON.parse(await readFile('examples/arthunt/invitation.created.json', 'utf8'))
  const invite = (id: string, userId: string) => {
    const body = structuredClone(example)
    body.envelope.eventId = crypto.randomUUID()
    body.data.invitationId = id
    body.data.recipient = { ...body.data.recipient, userId, email: `cli-invited-${userId.slice(0, 8)}@example.com` }
    return {
      eventId: body.envelope.eventId as string,
      event: {
        source: 'rabbitmq',
        origin: 'rabbitmq:email.notifications',
        sourceMessageId: body.envelope.eventId,
        receivedAt: new Date().toISOString(),
        headers: {},
        body: JSON.stringify(body),
      },
    }
  }
  const late = invite(invitationId, crypto.randomUUID())
  assert.equal((await api('POST', '/v1/ingest', INGEST, { events: [late.event] })).status, 202)
  const story = await waitFor(async () => {
    const answer = await api('GET', `/v1/events/${late.eventId}`, ADMIN)
    if (answer.status !== 200) return undefined
    const body = answer.body as { processed: { outcome: string }[]; notifications: unknown[] }
    return body.processed.length > 0 ? body : undefined
  }, 'the late invitation processed')
  assert.deepEqual(
    story.processed.map((mark) => mark.outcome),
    ['cancelled'],
  )
  assert.deepEqual(story.notifications, [])
  // A filter's dry run over a recipient with nothing waiting finds nothing and cancels nothing.
  const dry = JSON.parse(await cli('cancel', '--filter', '--user-id', crypto.randomUUID(), '--dry-run', '--json')) as {
    dryRun: boolean
    keys: unknown[]
  }
  assert.deepEqual(dry, { dryRun: true, more: false, keys: [] })
  await assert.rejects(cli('cancel'), /cancel needs a key/)
  const trail = JSON.parse(
    await cli('audit', 'list', '--action', 'cancellation.create', '--target', key, '--json'),
  ) as {
    via: string
  }[]
  assert.deepEqual(
    trail.map((row) => row.via),
    ['cli'],
  )
})
