/**
 * The recipient loop on the running dispatcher, for `npm run demo` and the
 * end-to-end test. An email bounces — a signed Resend webhook stands in for
 * the provider's report, since locally every email goes through the local
 * binding — and the next event for that address ends `suppressed`, unsent. A
 * recipient follows the one-click unsubscribe link of an optional email (the
 * `List-Unsubscribe` header of its raw MIME, posted as a mailbox provider
 * posts it) and the next email of that kind ends `opted-out`.
 */
import { Webhook } from 'svix'
import { api, collectOutcomes, type Endpoints, publishInvitation, type Sent, until, writeOutbox } from './demo-lib.ts'

/** One step of the loop: what it did, what should have followed, and what did. */
export type LoopStep = { step: string; expected: string; got: string }

type Recipient = { userId: string; email: string }

const fresh = () => crypto.randomUUID()

function responseCreated(recipient: Recipient) {
  return {
    envelope: {
      eventId: fresh(),
      eventType: 'response.created',
      schemaVersion: 1,
      occurredAt: new Date().toISOString(),
      producer: 'arthunt-api',
    },
    data: {
      responseId: fresh(),
      projectId: fresh(),
      projectTitle: 'Редизайн лендинга для студии керамики',
      recipient: { ...recipient, displayName: 'Анна Клиент' },
      actor: { userId: fresh(), displayName: 'Михаил Дизайнер' },
      proposedPrice: 45000,
      proposedCurrency: 'RUB',
      proposedDeadlineDays: 14,
      deepLink: 'https://arthunt.ru/projects/demo/responses',
    },
  }
}

/** An ArtHunt invitation.created to `recipient`, with fresh ids (one email). */
export function invitationCreated(recipient: Recipient) {
  return {
    envelope: {
      eventId: fresh(),
      eventType: 'invitation.created',
      schemaVersion: 1,
      occurredAt: new Date().toISOString(),
      producer: 'arthunt-api',
    },
    data: {
      invitationId: fresh(),
      projectId: fresh(),
      projectTitle: 'Редизайн лендинга для студии керамики',
      recipient: { ...recipient, displayName: 'Михаил Дизайнер' },
      actor: { userId: fresh(), displayName: 'Анна Клиент' },
      message: 'Добрый день! Ваш стиль идеально подходит под наш проект.',
      deepLink: 'https://arthunt.ru/invitations/demo',
    },
  }
}

type DemoEvent = { envelope: { eventId: string; eventType: string } }

/**
 * Sends an event through its source (response.created by the outbox,
 * invitation.created by RabbitMQ) and answers the status of its one
 * notification once it is final.
 */
async function send(endpoints: Endpoints, event: DemoEvent): Promise<{ status: string; id: string }> {
  const source: Sent['source'] = event.envelope.eventType === 'response.created' ? 'postgres' : 'rabbitmq'
  if (source === 'postgres') await writeOutbox(endpoints, Buffer.from(JSON.stringify(event)))
  else await publishInvitation(endpoints, event)
  const sent: Sent = { label: event.envelope.eventType, source, eventId: event.envelope.eventId, expect: 'email' }
  const [outcome] = await collectOutcomes(endpoints, [sent])
  return { status: outcome?.notificationStatus ?? outcome?.outcome ?? 'not seen', id: outcome?.notificationId ?? '' }
}

/** Resend's report that the message bounced for good, signed as Resend signs it. */
async function reportBounce(endpoints: Endpoints, secret: string, providerId: string, to: string): Promise<number> {
  const svixId = `msg_${fresh().replaceAll('-', '')}`
  const payload = JSON.stringify({
    type: 'email.bounced',
    created_at: new Date().toISOString(),
    data: {
      email_id: providerId,
      to: [to],
      subject: 'demo',
      bounce: { type: 'Permanent', subType: 'General', message: 'mailbox does not exist' },
    },
  })
  const now = new Date()
  const response = await fetch(new URL('/v1/webhooks/resend', endpoints.workerUrl), {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'svix-id': svixId,
      'svix-timestamp': String(Math.floor(now.getTime() / 1000)),
      'svix-signature': new Webhook(secret).sign(svixId, now, payload),
    },
    body: payload,
  })
  return response.status
}

/**
 * A new person in the contact replica, so that the locale of their emails is known (ru-RU), and, with
 * `timeZone`, the zone whose quiet hours hold them (else the Worker's DEFAULT_TIME_ZONE).
 */
export async function newRecipient(
  endpoints: Endpoints,
  prefix: string,
  timeZone?: string,
): Promise<{ userId: string; email: string }> {
  const person = { userId: fresh(), email: `${prefix}-${fresh().slice(0, 8)}@example.com` }
  const answer = await api(endpoints, `/v1/contacts/${person.userId}`, {
    method: 'PUT',
    body: JSON.stringify({ email: person.email, locale: 'ru-RU', ...(timeZone ? { timeZone } : {}) }),
  })
  if (answer.status !== 200) throw new Error(`the contact of ${person.email} answered ${answer.status}`)
  return person
}

/** A bounce, then a follow-up to the same address. */
async function bounceThenFollowUp(endpoints: Endpoints, secret: string, owner: Recipient): Promise<LoopStep[]> {
  const sent = await send(endpoints, responseCreated(owner))
  const steps: LoopStep[] = [{ step: 'response.created to a new address', expected: 'sent', got: sent.status }]
  const notification = (await api(endpoints, `/v1/notifications/${sent.id}`)).body ?? {}
  const webhook = await reportBounce(endpoints, secret, String(notification.providerId ?? ''), owner.email)
  steps.push({ step: 'Resend webhook email.bounced (Permanent)', expected: '202', got: String(webhook) })
  const suppression = await until(async () => {
    const { status, body } = await api(endpoints, `/v1/suppressions/${encodeURIComponent(owner.email)}`)
    return status === 200 ? String(body?.cause) : undefined
  }, 60_000)
  steps.push({ step: 'the address on the suppression list', expected: 'hard-bounce', got: suppression ?? 'absent' })
  const followUp = await send(endpoints, responseCreated(owner))
  steps.push({ step: 'response.created to the same address', expected: 'suppressed', got: followUp.status })
  return steps
}

/** The `List-Unsubscribe` link of a raw message (headers may be folded). */
function listUnsubscribeOf(raw: string): string | undefined {
  const headers = raw.split(/\r?\n\r?\n/)[0]?.replace(/\r?\n[ \t]+/g, ' ') ?? ''
  return /^List-Unsubscribe:\s*<([^>]+)>/im.exec(headers)?.[1]
}

/** An unsubscribe, then another email of the same kind. */
async function unsubscribeThenFollowUp(endpoints: Endpoints, specialist: Recipient): Promise<LoopStep[]> {
  const sent = await send(endpoints, invitationCreated(specialist))
  const steps: LoopStep[] = [{ step: 'invitation.created (an optional kind)', expected: 'sent', got: sent.status }]
  const message = (await api(endpoints, `/v1/notifications/${sent.id}?raw=true`)).body?.sentMessage as
    | { raw?: string }
    | undefined
  const link = listUnsubscribeOf(message?.raw ?? '')
  // The link names PUBLIC_URL; its path is posted to the Worker in front of us.
  const unsubscribe = link
    ? await fetch(new URL(new URL(link).pathname, endpoints.workerUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'List-Unsubscribe=One-Click',
      })
    : undefined
  steps.push({
    step: 'one-click POST to its List-Unsubscribe link',
    expected: '200',
    got: unsubscribe ? String(unsubscribe.status) : 'no List-Unsubscribe header',
  })
  const followUp = await send(endpoints, invitationCreated(specialist))
  steps.push({ step: 'invitation.created to the same person', expected: 'opted-out', got: followUp.status })
  return steps
}

/** What the loop did, and to whom (new people each time: the demo can run again and again). */
export type RecipientLoop = { steps: LoopStep[]; bounced: string; optedOut: string }

/** Both halves of the loop, side by side; its people live in `timeZone` when given (newRecipient). */
export async function showRecipientLoop(
  endpoints: Endpoints,
  resendWebhookSecret: string,
  timeZone?: string,
): Promise<RecipientLoop> {
  const owner = await newRecipient(endpoints, 'bounce', timeZone)
  const specialist = await newRecipient(endpoints, 'optout', timeZone)
  const [bounce, unsubscribe] = await Promise.all([
    bounceThenFollowUp(endpoints, resendWebhookSecret, owner),
    unsubscribeThenFollowUp(endpoints, specialist),
  ])
  return { steps: [...bounce, ...unsubscribe], bounced: owner.email, optedOut: specialist.email }
}
