import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import {
  closeAndSend,
  consume,
  digestOwner,
  digestsOf,
  membersOf,
  ownerWho,
  response,
  windowPassed,
} from './digests.ts'
import { ADMIN_TOKEN } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

/**
 * What an operator reads about a digest through the API (each answer checked
 * against /openapi.json by fetchWorker): the story of a digested event names
 * the digest it went into, its status, size, close or send time and email; a
 * digest's page lists the events it tells, in order, with their count and,
 * while it collects, when it closes. Addresses stay masked as for any
 * notification.
 */

type DigestReference = {
  id: string
  status: string
  size: number
  closesAt: string | null
  scheduledAt: string
  sentAt: string | null
  providerId: string | null
  sentMessage: { transport: string; messageId: string; sentAt: string } | null
}
type StoryBody = { notifications: { id: string; status: string; inDigest: DigestReference | null }[] }
type NotificationBody = {
  id: string
  status: string
  recipientEmail: string | null
  recipientName: string | null
  subject: string | null
  inDigest: DigestReference | null
  digest: {
    size: number
    closesAt: string | null
    events: { eventId: string; notificationId: string; kind: string; createdAt: string }[]
  } | null
}

async function read<T>(path: string): Promise<{ status: number; body: T; text: string }> {
  const response = await fetchWorker(path, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  const text = await response.text()
  return { status: response.status, body: JSON.parse(text) as T, text }
}

/** An owner's digest of three events, each delivered in its own batch: the first opens it, the others join it. */
async function collectingDigest() {
  const owner = await digestOwner()
  const events = [response(owner, 'Проект А'), response(owner, 'Проект Б'), response(owner, 'Проект В')]
  for (const event of events) await consume([event.message])
  const [digest] = await digestsOf(owner.userId)
  expect(digest?.status).toBe('collecting')
  return { owner, events, digest: digest as NonNullable<typeof digest> }
}

describe('digests in the operator API', () => {
  it('the story of a digested event names its digest, collecting until its close, then its email once sent', async () => {
    const { owner, events, digest } = await collectingDigest()
    const [first, second] = events.map((event) => event.eventId)

    const open = await read<StoryBody>(`/v1/events/${first}`)
    expect(open.status).toBe(200)
    const [member] = open.body.notifications
    expect(member).toMatchObject({
      status: 'digested',
      inDigest: {
        id: digest.id,
        status: 'collecting',
        size: 3,
        closesAt: digest.scheduled_at,
        sentAt: null,
        providerId: null,
        sentMessage: null,
      },
    })
    // A story carries no address, name or content, the digest's included.
    expect(open.text).not.toContain(owner.email)
    expect(open.text).not.toContain('Анна')

    // The member's own page names the digest too, and lists no events of its own.
    const page = await read<NotificationBody>(`/v1/notifications/${member?.id}`)
    expect(page.body).toMatchObject({ status: 'digested', inDigest: { id: digest.id }, digest: null })

    await closeAndSend(digest.id, await windowPassed(digest.id))
    const sent = await env.DB.prepare(
      `SELECT n.sent_at, n.provider_id, s.transport, s.message_id FROM notifications n
       JOIN sent_messages s ON s.notification_id = n.id WHERE n.id = ?1`,
    )
      .bind(digest.id)
      .first<{ sent_at: string; provider_id: string | null; transport: string; message_id: string }>()
    expect(sent).not.toBeNull()

    const closed = await read<StoryBody>(`/v1/events/${second}`)
    expect(closed.body.notifications).toHaveLength(1)
    expect(closed.body.notifications[0]).toMatchObject({
      status: 'digested',
      inDigest: {
        id: digest.id,
        status: 'sent',
        size: 3,
        closesAt: null,
        sentAt: sent?.sent_at,
        providerId: sent?.provider_id,
        sentMessage: { transport: sent?.transport, messageId: sent?.message_id },
      },
    })
    expect(closed.text).not.toContain(owner.email)
  })

  it("a digest's page lists the events it tells in order with their count, and while it collects, when it closes", async () => {
    const { owner, events, digest } = await collectingDigest()
    const members = await membersOf(digest.id)

    const open = await read<NotificationBody>(`/v1/notifications/${digest.id}`)
    expect(open.status).toBe(200)
    expect(open.body).toMatchObject({ status: 'collecting', inDigest: null, subject: null })
    expect(open.body.digest).toMatchObject({ size: 3, closesAt: digest.scheduled_at })
    // Oldest first, as the email lists them: the order of the members in D1.
    expect(open.body.digest?.events.map((event) => [event.eventId, event.notificationId])).toEqual(
      members.map((row) => [row.event_id, row.id]),
    )
    expect(open.body.digest?.events.map((event) => event.eventId).sort()).toEqual(
      events.map((event) => event.eventId).sort(),
    )
    expect(open.body.digest?.events.every((event) => event.kind === 'ResponseCreated')).toBe(true)
    // The digest's recipient is masked like any notification's.
    expect(open.body.recipientEmail).toBe(`${owner.email[0]}***@example.com`)
    expect(open.text).not.toContain(owner.email)

    await closeAndSend(digest.id, await windowPassed(digest.id))
    const closed = await read<NotificationBody>(`/v1/notifications/${digest.id}`)
    expect(closed.body.status).toBe('sent')
    expect(closed.body.digest).toMatchObject({ size: 3, closesAt: null })
    expect(closed.body.digest?.events).toEqual(open.body.digest?.events)
  })

  it('a notification sent at once is neither a digest nor in one', async () => {
    // An owner who chose responses one by one.
    const instant = response(await ownerWho('instant'), 'Проект')
    await consume([instant.message])
    const story = await read<StoryBody>(`/v1/events/${instant.eventId}`)
    expect(story.body.notifications).toMatchObject([{ status: 'pending', inDigest: null }])
    const page = await read<NotificationBody>(`/v1/notifications/${story.body.notifications[0]?.id}`)
    expect(page.body).toMatchObject({ inDigest: null, digest: null })
  })
})
