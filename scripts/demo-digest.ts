/**
 * A digest on the running dispatcher, for `npm run demo` and the end-to-end
 * test: five specialists respond to one project within a minute, through the
 * PostgreSQL outbox, and the project owner gets one email that lists all five
 * — `ResponseCreated`'s default (a 10-minute window; DIGEST_WINDOW_SECONDS
 * makes it seconds on a local run). Each event's story names the digest it
 * went into; the digest's page lists the five events.
 */
import { api, type Endpoints, emailOf, until, writeOutbox } from './demo-lib.ts'
import { newRecipient } from './demo-recipients.ts'

/** What the demo saw: each event's outcome and digest, and the digest's email. */
export type DigestShown = {
  owner: { userId: string; email: string }
  events: { eventId: string; actor: string; status: string; digestId: string | null }[]
  digest: { id: string; status: string; size: number; subject: string; listed: number } | undefined
}

const ACTORS = ['Михаил Дизайнер', 'Ольга Иллюстратор', 'Пётр Верстальщик', 'Ирина Копирайтер', 'Сергей Фотограф']

function response(owner: { userId: string; email: string }, actor: string, projectId: string) {
  const eventId = crypto.randomUUID()
  return {
    eventId,
    body: {
      envelope: {
        eventId,
        eventType: 'response.created',
        schemaVersion: 1,
        occurredAt: new Date().toISOString(),
        producer: 'arthunt-api',
      },
      data: {
        responseId: crypto.randomUUID(),
        projectId,
        projectTitle: 'Редизайн лендинга для студии керамики',
        recipient: { ...owner, displayName: 'Анна Клиент' },
        actor: { userId: crypto.randomUUID(), displayName: actor },
        proposedPrice: 45000,
        proposedCurrency: 'RUB',
        proposedDeadlineDays: 14,
        deepLink: `https://arthunt.ru/projects/${projectId}/responses/${eventId}`,
      },
    },
  }
}

/**
 * Five responses to one owner's project, then what became of them: one digest, sent, telling all five.
 * The owner lives in `timeZone` when given (newRecipient).
 */
export async function showDigest(endpoints: Endpoints, timeoutMs = 120_000, timeZone?: string): Promise<DigestShown> {
  // In the contact replica, so that their emails are in Russian whatever the Worker's default locale.
  const owner = await newRecipient(endpoints, 'owner', timeZone)
  const projectId = crypto.randomUUID()
  const sent = ACTORS.map((actor) => ({ actor, ...response(owner, actor, projectId) }))
  // One transaction, as five responses made close together reach the outbox: one digest whatever its window.
  await writeOutbox(endpoints, ...sent.map(({ body }) => Buffer.from(JSON.stringify(body))))
  // The last stories read, so that a digest that never went out still shows where each event stands.
  let stories: Awaited<ReturnType<typeof api>>[] = []
  await until(async () => {
    stories = await Promise.all(sent.map(({ eventId }) => api(endpoints, `/v1/events/${eventId}`)))
    const digests = stories.map((story) => {
      const notification = emailOf(
        (story.body?.notifications ?? []) as { channel?: string; inDigest?: { id: string; status: string } }[],
      )
      return notification?.inDigest
    })
    return digests.every((digest) => digest?.status === 'sent') ? true : undefined
  }, timeoutMs)
  const events = sent.map(({ eventId, actor }, index) => {
    const notification = emailOf(
      (stories[index]?.body?.notifications ?? []) as {
        channel?: string
        status: string
        inDigest?: { id: string } | null
      }[],
    )
    return { eventId, actor, status: notification?.status ?? 'unknown', digestId: notification?.inDigest?.id ?? null }
  })
  const digestId = events[0]?.digestId
  if (!digestId) return { owner, events, digest: undefined }
  // The subject is shown only to a read that reveals it, recorded in the audit trail.
  const page = (await api(endpoints, `/v1/notifications/${digestId}?reveal=true`)).body as {
    status: string
    subject: string
    digest: { size: number; events: unknown[] }
  } | null
  return {
    owner,
    events,
    digest: page
      ? {
          id: digestId,
          status: page.status,
          size: page.digest.size,
          subject: page.subject,
          listed: page.digest.events.length,
        }
      : undefined,
  }
}
