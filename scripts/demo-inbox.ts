/**
 * The demo's in-app part: turns ResponseCreated's in-app channel on (a
 * deployment chooses to, docs/inbox.md), then watches a user's feed the way
 * an open page does — a socket with the user's token — while the demo's
 * events go through, so that it can say when each item was pushed. Then an
 * escalation: a response whose item nobody looks at, whose email goes once
 * its wait (ESCALATION_AFTER_SECONDS in .dev.vars) ends.
 */
import { readFileSync } from 'node:fs'
import { inboxToken } from '../support/inbox-host.ts'
import { api, type Endpoints, emailOf, OWNER, until, writeOutbox } from './demo-lib.ts'
import { newRecipient } from './demo-recipients.ts'

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

/** An email's escalation as the event's story tells it (docs/inbox.md). */
export type StoryEscalation = {
  inApp: string
  unless: 'seen' | 'read'
  decidedAt: string | null
  markedAt: string | null
  first: 'mark' | 'email' | null
}

/** A notification of an event's story, as these steps read it. */
type Row = {
  id: string
  channel: string
  status: string
  inDigest?: { id: string; status: string } | null
  escalation?: StoryEscalation | null
}

/**
 * Whether an email has come to its end: sent, alone or in a digest sent (a
 * digest of one goes as itself), or spared because its in-app item was seen
 * in time (`seen-in-app`). One that waits for its item (`escalating`), or for
 * its digest, has not.
 */
function emailDone(mail: Row | undefined): boolean {
  return (
    mail?.status === 'sent' ||
    mail?.status === 'seen-in-app' ||
    (mail?.status === 'digested' && mail.inDigest?.status === 'sent')
  )
}

/** A response.created of the example, to `recipient` when given, about a project of its own. */
function response(projectTitle: string, recipient?: { userId: string; email: string }) {
  const event = JSON.parse(readFileSync('examples/arthunt/response.created.json', 'utf8'))
  event.envelope.eventId = crypto.randomUUID()
  event.data.responseId = crypto.randomUUID()
  // A project of its own: a response to the digest step's project would join its email.
  event.data.projectId = crypto.randomUUID()
  event.data.projectTitle = projectTitle
  if (recipient) event.data.recipient = { ...event.data.recipient, ...recipient }
  return event as { envelope: { eventId: string } }
}

/** The subject of the email that carried `email` (its digest's, when told in one): revealed, so audited. */
async function subjectOf(endpoints: Endpoints, email: Row | undefined): Promise<string> {
  const carrier = email?.status === 'seen-in-app' ? undefined : (email?.inDigest?.id ?? email?.id)
  return carrier ? String((await api(endpoints, `/v1/notifications/${carrier}?reveal=true`)).body?.subject ?? '') : ''
}

/** An email's status as the demo prints it. */
function shownStatus(email: Row): string {
  if (email.status === 'digested') return 'sent in a digest'
  if (email.status === 'seen-in-app') return 'not sent: its item was seen in the app first'
  return email.status
}

/**
 * A response to Anna's project (the seed's owner) written to the outbox
 * while a socket on her feed is open, as the demo page's is: the item pushed
 * to it, and the email beside it — which waits for the item to go unseen
 * (ESCALATION_AFTER_SECONDS in .dev.vars), and is spared if whoever watches
 * the demo page opens the bell meanwhile.
 */
export async function showInboxLive(endpoints: Endpoints, secret: string, timeoutMs = 120_000): Promise<InboxLive> {
  await turnInAppOn(endpoints)
  const watch = watchFeed(endpoints.workerUrl, secret, OWNER)
  try {
    await watch.ready
    const event = response('Живой колокольчик')
    const written = Date.now()
    await writeOutbox(endpoints, Buffer.from(JSON.stringify(event)))
    const rows = await until(async () => {
      const { status, body } = await api(endpoints, `/v1/events/${event.envelope.eventId}`)
      const found = status === 200 ? ((body?.notifications ?? []) as Row[]) : []
      const item = found.find((row) => row.channel === 'in-app')
      // The email waits for its item to go unseen, then for its digest window (DIGEST_WINDOW_SECONDS in
      // .dev.vars): told in a digest, it goes in the digest's email (a digest of one goes as itself).
      const mail = emailOf(found.filter((row) => row.channel === 'email'))
      return item?.status === 'sent' && watch.pushed.has(item.id) && emailDone(mail) ? found : undefined
    }, timeoutMs)
    const item = rows?.find((row) => row.channel === 'in-app')
    const email = rows ? emailOf(rows.filter((row) => row.channel === 'email')) : undefined
    const pushed = item ? watch.pushed.get(item.id) : undefined
    return {
      eventId: event.envelope.eventId,
      email: email ? { status: shownStatus(email), subject: await subjectOf(endpoints, email) } : undefined,
      item: item && pushed ? { id: item.id, title: pushed.title, status: item.status } : undefined,
      pushedAfterMs: pushed ? pushed.at - written : undefined,
    }
  } finally {
    watch.close()
  }
}

/** What the escalation step showed: its event, its item, its email and the story's escalation. */
export type EscalationShown = {
  eventId: string
  owner: { userId: string; email: string }
  item: { id: string; status: string } | undefined
  email: { status: string; subject: string } | undefined
  escalation: StoryEscalation | undefined
}

/**
 * An escalation that became an email because nobody looked: a response to a
 * new owner, whose feed no page shows, so that nothing marks the item seen.
 * Its email waits ESCALATION_AFTER_SECONDS (.dev.vars; 30 minutes when
 * deployed), then the owner's feed decides that it goes, and it goes as
 * ResponseCreated's emails go (its digest: a digest of one sends it as
 * itself). The story's `escalation` says so: `first: 'email'`, no `markedAt`.
 */
export async function showEscalation(
  endpoints: Endpoints,
  timeoutMs = 120_000,
  timeZone?: string,
): Promise<EscalationShown> {
  await turnInAppOn(endpoints)
  // In the contact replica, so that the email is in Russian whatever the Worker's default locale, and, with
  // `timeZone`, living there (the demo gives a zone where it is day: quiet hours do not hold the email).
  const owner = await newRecipient(endpoints, 'unlooked', timeZone)
  const event = response('Отклик, который никто не открыл', owner)
  await writeOutbox(endpoints, Buffer.from(JSON.stringify(event)))
  // The last story read, so that an email that never went still shows where it stands.
  let last: Row[] = []
  const rows =
    (await until(async () => {
      const { status, body } = await api(endpoints, `/v1/events/${event.envelope.eventId}`)
      last = status === 200 ? ((body?.notifications ?? []) as Row[]) : last
      return emailDone(emailOf(last.filter((row) => row.channel === 'email'))) ? last : undefined
    }, timeoutMs)) ?? last
  const item = rows.find((row) => row.channel === 'in-app')
  const email = emailOf(rows.filter((row) => row.channel === 'email'))
  return {
    eventId: event.envelope.eventId,
    owner,
    item: item ? { id: item.id, status: item.status } : undefined,
    email: email ? { status: shownStatus(email), subject: await subjectOf(endpoints, email) } : undefined,
    escalation: email?.escalation ?? undefined,
  }
}
