/**
 * The demo's in-app part: turns ResponseCreated's in-app channel on (a
 * deployment chooses to, docs/inbox.md), then watches a user's feed the way
 * an open page does — a socket with the user's token — while the demo's
 * events go through, so that it can say when each item was pushed.
 */
import { readFileSync } from 'node:fs'
import { inboxToken } from '../support/inbox-host.ts'
import { api, type Endpoints, emailOf, OWNER, until, writeOutbox } from './demo-lib.ts'

/** The demo page of `npm start` (support/inbox-host.ts), beside the Worker and the bridge's health port. */
export const DEMO_PAGE_PORT = 8789

/** Turns the in-app channel of ResponseCreated on, for every urgency; throws when the Worker refuses. */
export async function turnInAppOn(endpoints: Endpoints): Promise<void> {
  const answer = await api(endpoints, '/v1/channel-policies/ResponseCreated/in-app', {
    method: 'PUT',
    body: JSON.stringify({ enabled: true }),
  })
  if (answer.status !== 200) throw new Error(`turning the in-app channel on answered ${answer.status}`)
}

/** An item pushed to the watching socket, and when. */
export type Pushed = { id: string; title: string; at: number }

/**
 * A socket on `userId`'s feed, as the demo page's element holds one: what it
 * was pushed, by notification id. `ready` resolves once the socket is live.
 */
export function watchFeed(workerUrl: string, secret: string, userId: string) {
  const pushed = new Map<string, Pushed>()
  const socket = new WebSocket(`${workerUrl.replace(/^http/, 'ws')}/v1/inbox/socket`, [
    'notify-edge.inbox',
    `bearer.${inboxToken(userId, secret)}`,
  ])
  const ready = new Promise<void>((resolve, reject) => {
    socket.addEventListener('error', () => reject(new Error('the inbox socket did not open')))
    socket.addEventListener('message', (event) => {
      const message = JSON.parse(String(event.data)) as { type: string; item?: { id: string; title: string } }
      if (message.type === 'state') resolve()
      if (message.type === 'added' && message.item)
        pushed.set(message.item.id, { id: message.item.id, title: message.item.title, at: Date.now() })
    })
  })
  return { pushed, ready, close: () => socket.close() }
}

/** What the live step showed: the event's email and in-app item, and when the item was pushed. */
export type InboxLive = {
  eventId: string
  email: { status: string; subject: string } | undefined
  item: { id: string; title: string; status: string } | undefined
  /** From the outbox row's commit to the item on the watching socket. */
  pushedAfterMs: number | undefined
}

/**
 * A response to Anna's project (the seed's owner) written to the outbox
 * while a socket on her feed is open, as the demo page's is: the item pushed
 * to it, and the email beside it.
 */
export async function showInboxLive(endpoints: Endpoints, secret: string): Promise<InboxLive> {
  await turnInAppOn(endpoints)
  const watch = watchFeed(endpoints.workerUrl, secret, OWNER)
  try {
    await watch.ready
    const event = JSON.parse(readFileSync('examples/arthunt/response.created.json', 'utf8'))
    event.envelope.eventId = crypto.randomUUID()
    event.data.responseId = crypto.randomUUID()
    // A project of its own: a response to the digest step's project would join its email.
    event.data.projectId = crypto.randomUUID()
    event.data.projectTitle = 'Живой колокольчик'
    const written = Date.now()
    await writeOutbox(endpoints, Buffer.from(JSON.stringify(event)))
    type Row = { id: string; channel: string; status: string; inDigest?: { id: string; status: string } | null }
    const rows = await until(async () => {
      const { status, body } = await api(endpoints, `/v1/events/${event.envelope.eventId}`)
      const found = status === 200 ? ((body?.notifications ?? []) as Row[]) : []
      const item = found.find((row) => row.channel === 'in-app')
      // The email waits for its digest window (DIGEST_WINDOW_SECONDS in .dev.vars): told in a digest, it goes
      // in the digest's email (a digest of one goes as itself).
      const mail = emailOf(found.filter((row) => row.channel === 'email'))
      const settled = mail?.status === 'sent' || (mail?.status === 'digested' && mail.inDigest?.status === 'sent')
      return item?.status === 'sent' && watch.pushed.has(item.id) && settled ? found : undefined
    }, 90_000)
    const item = rows?.find((row) => row.channel === 'in-app')
    const email = rows ? emailOf(rows.filter((row) => row.channel === 'email')) : undefined
    const pushed = item ? watch.pushed.get(item.id) : undefined
    // The subject is shown only to a read that reveals it, recorded in the audit trail.
    const carrier = email?.inDigest?.id ?? email?.id
    const subject = carrier
      ? String((await api(endpoints, `/v1/notifications/${carrier}?reveal=true`)).body?.subject ?? '')
      : ''
    return {
      eventId: event.envelope.eventId,
      email: email ? { status: email.status === 'digested' ? `sent in a digest` : email.status, subject } : undefined,
      item: item && pushed ? { id: item.id, title: pushed.title, status: item.status } : undefined,
      pushedAfterMs: pushed ? pushed.at - written : undefined,
    }
  } finally {
    watch.close()
  }
}
