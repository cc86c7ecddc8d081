/**
 * Sends each seed sample through its natural source — outbox insert, RabbitMQ
 * publish, Kafka produce — plus one poison event per source, and reads back
 * what became of each through the operator API. Used by `npm run demo` and by
 * the end-to-end test.
 */
import { readFileSync } from 'node:fs'
import { Kafka, logLevel, Partitioners } from 'kafkajs'
import postgres from 'postgres'
import { Connection } from 'rabbitmq-client'

/** Where everything is. Names default to the seeds'. */
export type Endpoints = {
  workerUrl: string
  adminToken: string
  pgUrl: string
  pgSchema?: string
  rabbitUrl: string
  exchange?: string
  kafkaBrokers: string[]
  topics?: { requests: string; persons: string; contacts: string }
}

/** One event sent, and what should become of it. */
export type Sent = {
  label: string
  source: 'postgres' | 'rabbitmq' | 'kafka'
  eventId: string
  expect: 'email' | 'dead-letter' | 'ignored'
}

/** What became of it. */
export type Outcome = Sent & {
  outcome: string
  subject?: string
  to?: string
  code?: string
  notificationStatus?: string
  notificationId?: string
}

const json = (path: string) => JSON.parse(readFileSync(path, 'utf8'))
export const OWNER = '0c0e2d2a-5c71-4a3f-8a2f-7e9c1b3d4a55'
export const REVIEWER = '7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2903'

/** `anna.client@example.com` → `a***@example.com`. */
export function mask(address: string | undefined): string {
  if (!address) return ''
  const at = address.indexOf('@')
  return `${address[0]}***${address.slice(at)}`
}

/** An operator API call with the admin token; the body parsed, or null. */
export async function api(endpoints: Endpoints, path: string, init: RequestInit = {}) {
  const response = await fetch(new URL(path, endpoints.workerUrl), {
    ...init,
    headers: { authorization: `Bearer ${endpoints.adminToken}`, 'content-type': 'application/json', ...init.headers },
  })
  return { status: response.status, body: (await response.json().catch(() => null)) as Record<string, unknown> | null }
}

/** Polls `check` until it answers, or gives up after `timeoutMs` (undefined). */
export async function until<T>(check: () => Promise<T | undefined>, timeoutMs: number): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined)
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  return undefined
}

/**
 * Writes messages to the outbox (a log row and a data row each), all in one
 * transaction, as a producer writes what one business transaction emitted;
 * returns the first one's message id, which a body without an event id is known by.
 */
export async function writeOutbox(endpoints: Endpoints, ...bodies: Buffer[]): Promise<string> {
  const schema = endpoints.pgSchema ?? 'data_exchange'
  const sql = postgres(endpoints.pgUrl, { max: 1, onnotice: () => {} })
  const ids = bodies.map(() => crypto.randomUUID())
  try {
    await sql.begin(async (tx) => {
      for (const [index, body] of bodies.entries()) {
        const id = ids[index] as string
        await tx`INSERT INTO ${tx(schema)}.message_queue_log (message_id) VALUES (${id})`
        await tx`INSERT INTO ${tx(schema)}.message_queue_log_data (message_id, message_body) VALUES (${id}, ${body})`
      }
    })
  } finally {
    await sql.end({ timeout: 1 })
  }
  return ids[0] as string
}

/**
 * Publishes ArtHunt invitation events on the exchange, with publisher confirms, each with its type's
 * routing key (`notifications.email.invitation.created`, `….invitation.withdrawn`).
 */
export async function publishInvitation(
  endpoints: Endpoints,
  ...invitations: { envelope: { eventId: string; eventType?: string } }[]
): Promise<void> {
  const rabbit = new Connection({ url: endpoints.rabbitUrl, connectionName: 'notify-edge-demo' })
  const publisher = rabbit.createPublisher({ confirm: true })
  try {
    for (const invitation of invitations) {
      await publisher.send(
        {
          exchange: endpoints.exchange ?? 'arthunt.notifications',
          routingKey: `notifications.email.${invitation.envelope.eventType ?? 'invitation.created'}`,
          messageId: invitation.envelope.eventId,
          durable: true,
        },
        Buffer.from(JSON.stringify(invitation)),
      )
    }
  } finally {
    await publisher.close()
    await rabbit.close()
  }
}

/**
 * The samples' recipients, in the contact replica by an operator's correction (PUT /v1/contacts without a
 * version): Anna, the reviewer — the contact feed's next versions come after — and the invited specialist,
 * whom the invitation names inline and the replica does not know otherwise.
 */
const SAMPLE_RECIPIENTS = [
  { userId: OWNER, email: 'anna.client@example.com', displayName: 'Анна Клиент' },
  { userId: REVIEWER, email: 'reviewer@example.com', displayName: 'Рецензент ПИН' },
  {
    userId: '9f4e8b7a-2c9f-4f1e-b5c3-6d2e1f0a8b77',
    email: 'mikhail.designer@example.com',
    displayName: 'Михаил Дизайнер',
  },
]

/**
 * Sends the samples and the poison events; returns what was sent. With `timeZone`, every recipient of the
 * samples lives there (their contacts say so, before the first sample goes): the demo gives a zone where it
 * is day, so that quiet hours hold none of their emails whatever the hour.
 */
export async function sendSamples(endpoints: Endpoints, timeZone?: string): Promise<Sent[]> {
  const topics = endpoints.topics ?? {
    requests: 'pin.profile.verification-requests.v1',
    persons: 'pin.profile.persons.v1',
    contacts: 'pin.identity.contacts.v1',
  }
  const sent: Sent[] = []
  const fresh = () => crypto.randomUUID()
  if (timeZone) {
    for (const { userId, ...contact } of SAMPLE_RECIPIENTS) {
      const answer = await api(endpoints, `/v1/contacts/${userId}`, {
        method: 'PUT',
        body: JSON.stringify({ ...contact, locale: 'ru-RU', timeZone }),
      })
      if (answer.status !== 200) throw new Error(`the contact of ${userId} answered ${answer.status}`)
    }
  }

  // Kafka first: the contact replica that PIN recipients' addresses come from.
  const kafka = new Kafka({ clientId: 'notify-edge-demo', brokers: endpoints.kafkaBrokers, logLevel: logLevel.NOTHING })
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: true })
  await producer.connect()
  const record = (sample: { key: string; headers: Record<string, string>; value: unknown }, messageId: string) => ({
    key: sample.key,
    headers: { ...sample.headers, 'message-id': messageId },
    value: JSON.stringify(sample.value),
  })
  const contact = json('examples/pin/contact-upserted.json')
  if (timeZone) contact.value.TimeZone = timeZone
  const reviewerContact = {
    ...contact,
    key: REVIEWER,
    value: {
      UserId: REVIEWER,
      Email: 'reviewer@example.com',
      Locale: 'ru-RU',
      TimeZone: timeZone ?? 'Europe/Moscow',
      DisplayName: 'Рецензент ПИН',
      Version: 1,
    },
  }
  await producer.send({
    topic: topics.contacts,
    messages: [record(contact, fresh()), record(reviewerContact, fresh())],
  })
  await until(
    async () => ((await api(endpoints, `/v1/contacts/${REVIEWER}`)).status === 200 ? true : undefined),
    60_000,
  )

  // PostgreSQL outbox: response.created (AH-MVP-007), and a body that is not JSON.
  const response = json('examples/arthunt/response.created.json')
  response.envelope.eventId = fresh()
  await writeOutbox(endpoints, Buffer.from(JSON.stringify(response)))
  sent.push({ label: 'response.created', source: 'postgres', eventId: response.envelope.eventId, expect: 'email' })
  const poisonRow = await writeOutbox(endpoints, Buffer.from('{"envelope": not json'))
  sent.push({ label: 'poison: body not JSON', source: 'postgres', eventId: poisonRow, expect: 'dead-letter' })

  // RabbitMQ: invitation.created (AH-MVP-006), and one without recipient.email.
  const invitation = json('examples/arthunt/invitation.created.json')
  invitation.envelope.eventId = fresh()
  const poisonInvitation = json('examples/arthunt/invitation.created.json')
  poisonInvitation.envelope.eventId = fresh()
  delete poisonInvitation.data.recipient.email
  await publishInvitation(endpoints, invitation, poisonInvitation)
  sent.push(
    { label: 'invitation.created', source: 'rabbitmq', eventId: invitation.envelope.eventId, expect: 'email' },
    {
      label: 'poison: no recipient.email',
      source: 'rabbitmq',
      eventId: poisonInvitation.envelope.eventId,
      expect: 'dead-letter',
    },
  )

  // Kafka: the PIN profile events of a fresh verification story.
  const request = fresh()
  const person = fresh()
  const submitted = json('examples/pin/verification-request-submitted.json')
  Object.assign(submitted.value, { RequestId: request, PersonId: person })
  const rejected = json('examples/pin/verification-completed.json')
  Object.assign(rejected.value, { RequestId: request, PersonId: person })
  const approved = json('examples/pin/verification-completed.json')
  Object.assign(approved.value, { RequestId: fresh(), PersonId: person, Decision: 'approved', Reason: null })
  const upsert = json('examples/pin/person-upserted.json')
  Object.assign(upsert.value, { PersonId: person, VerificationRequestId: request })
  const poison = json('examples/pin/verification-completed.json')
  Object.assign(poison.value, { UserId: 'not-a-guid' })
  const ids = { submitted: fresh(), rejected: fresh(), approved: fresh(), upsert: fresh(), poison: fresh() }
  await producer.send({ topic: topics.requests, messages: [record(submitted, ids.submitted)] })
  await producer.send({
    topic: topics.requests,
    messages: [record(rejected, ids.rejected), record(approved, ids.approved)],
  })
  await until(
    async () => ((await api(endpoints, `/v1/events/${ids.rejected}`)).status === 200 ? true : undefined),
    60_000,
  )
  await producer.send({ topic: topics.persons, messages: [record(upsert, ids.upsert)] })
  await producer.send({ topic: topics.requests, messages: [record(poison, ids.poison)] })
  await producer.disconnect()
  sent.push(
    { label: 'verification-request-submitted', source: 'kafka', eventId: ids.submitted, expect: 'email' },
    { label: 'verification-completed (rejected)', source: 'kafka', eventId: ids.rejected, expect: 'email' },
    { label: 'verification-completed (approved)', source: 'kafka', eventId: ids.approved, expect: 'email' },
    { label: 'person-upserted (same decision)', source: 'kafka', eventId: ids.upsert, expect: 'ignored' },
    { label: 'poison: UserId not a GUID', source: 'kafka', eventId: ids.poison, expect: 'dead-letter' },
  )
  return sent
}

/** A notification as an event's story shows it, with the digest it is in, if any. */
type Told = { id: string; status: string; channel?: string; inDigest?: { status: string } | null }

/**
 * The email among an event's notifications for one recipient: with the in-app channel on (the demo turns
 * it on for ResponseCreated), an event has an in-app notification beside it.
 */
export function emailOf<T extends { channel?: string }>(notifications: readonly T[]): T | undefined {
  return notifications.find((notification) => notification.channel === 'email') ?? notifications[0]
}

// `escalating`: an email waiting for its in-app item to go unseen (the in-app channel on, as a demo run before
// this one left it) is on its way until its feed decides.
const ON_ITS_WAY = ['pending', 'sending', 'collecting', 'closing', 'escalating']

/**
 * Whether a notification has come to something: sent or ended, or told in a
 * digest that has (a digest of one sends its notification as itself: it is
 * `digested` only until its digest closes).
 */
function settled(notification: Told): boolean {
  if (notification.status === 'digested') {
    return notification.inDigest ? !ON_ITS_WAY.includes(notification.inDigest.status) : false
  }
  return !ON_ITS_WAY.includes(notification.status)
}

/** Waits for each event's fate and reads it through the operator API. */
export async function collectOutcomes(
  endpoints: Endpoints,
  sent: readonly Sent[],
  timeoutMs = 90_000,
): Promise<Outcome[]> {
  return Promise.all(
    sent.map(async (item) => {
      const story = await until(async () => {
        const { status, body } = await api(endpoints, `/v1/events/${item.eventId}`)
        if (status !== 200 || !body) return undefined
        const notifications = body.notifications as Told[]
        const deadLetters = body.deadLetters as { code: string }[]
        const processed = body.processed as { outcome: string }[]
        if (deadLetters.length > 0) return body
        if (processed.length > 0 && notifications.every(settled)) return body
        return undefined
      }, timeoutMs)
      if (!story) return { ...item, outcome: 'not seen yet' }
      const deadLetters = story.deadLetters as { code: string }[]
      if (deadLetters.length > 0) return { ...item, outcome: 'dead-lettered', code: deadLetters[0]?.code }
      const processed = story.processed as { outcome: string }[]
      const notification = emailOf(story.notifications as { id: string; status: string; channel?: string }[])
      if (!notification) return { ...item, outcome: processed[0]?.outcome ?? 'unknown' }
      // The subject and the address are shown only to a read that reveals them, recorded in the audit trail.
      const { body } = await api(endpoints, `/v1/notifications/${notification.id}?reveal=true`)
      return {
        ...item,
        outcome: processed[0]?.outcome ?? 'unknown',
        notificationStatus: notification.status,
        notificationId: notification.id,
        subject: String(body?.subject ?? ''),
        to: String(body?.recipientEmail ?? ''),
      }
    }),
  )
}
