/**
 * Making digests in the workerd tests: a recipient who chose digests, events
 * for them, the window moved into the past, and the close and send by the
 * dispatch messages (test/digest.test.ts, test/digest-story.test.ts).
 */
import { env } from 'cloudflare:workers'
import { expect } from 'vitest'
import { deliverBatch, dispatchOnce, freshInbound, guid } from './helpers.ts'

/** A digest's row, as the tests read it. */
export type DigestRow = {
  id: string
  status: string
  kind: string
  scheduled_at: string
  digest_size: number | null
  subject: string | null
  text_body: string | null
  recipient_email: string | null
  error_code: string | null
  enqueued_at: string | null
}

/** A new project owner who chose how ResponseCreated reaches them by email: in a digest, or one by one. */
export async function ownerWho(chose: 'digest' | 'instant'): Promise<{ userId: string; email: string }> {
  const userId = guid()
  await env.DB.prepare(
    `INSERT INTO preferences (user_id, kind, channel, enabled, source, updated_at, mode)
     VALUES (?1, 'ResponseCreated', 'email', 1, 'api', ?2, ?3)`,
  )
    .bind(userId, new Date().toISOString(), chose)
    .run()
  return { userId, email: `${chose}-${userId.slice(0, 8)}@example.com` }
}

/** A recipient who chose digests of ResponseCreated by email. */
export function digestOwner(): Promise<{ userId: string; email: string }> {
  return ownerWho('digest')
}

/** A response.created event to `owner`'s project `title`, and its event id. */
export function response(owner: { userId: string; email: string }, title: string, actor = 'Михаил Дизайнер') {
  let eventId = ''
  const message = freshInbound('response.created', (value) => {
    const data = value.data as Record<string, unknown>
    data.projectTitle = title
    data.recipient = { userId: owner.userId, email: owner.email, displayName: 'Анна Клиент' }
    data.actor = { userId: guid(), displayName: actor }
    eventId = (value.envelope as { eventId: string }).eventId
  })
  return { message, eventId }
}

/**
 * Delivers events to the notify-events consumer in one batch, as Cloudflare would, with a
 * ten-minute digest window, so that no digest closes by its own message while a test looks at
 * it: the tests close them by hand (`windowPassed`, `closeAndSend`).
 */
export async function consume(messages: unknown[], attempts = 1) {
  return deliverBatch(
    messages.map((body) => ({ id: `m-${guid()}`, attempts, body })),
    'notify-events',
    { DIGEST_WINDOW_SECONDS: '600' },
  )
}

/** A recipient's digests, oldest first. */
export async function digestsOf(userId: string): Promise<DigestRow[]> {
  const { results } = await env.DB.prepare(
    `SELECT id, status, kind, scheduled_at, digest_size, subject, text_body, recipient_email, error_code, enqueued_at
     FROM notifications WHERE recipient_user_id = ?1 AND is_digest = 1 ORDER BY created_at, rowid`,
  )
    .bind(userId)
    .all<DigestRow>()
  return results
}

/** A digest's members, oldest first. */
export async function membersOf(digestId: string): Promise<{ id: string; event_id: string; status: string }[]> {
  const { results } = await env.DB.prepare(
    'SELECT id, event_id, status FROM notifications WHERE digest_id = ?1 ORDER BY created_at, rowid',
  )
    .bind(digestId)
    .all<{ id: string; event_id: string; status: string }>()
  return results
}

/** Moves a digest's close into the past, as if its window had passed. */
export async function windowPassed(digestId: string): Promise<string> {
  const past = new Date(Date.now() - 1000).toISOString()
  await env.DB.prepare("UPDATE notifications SET scheduled_at = ?2 WHERE id = ?1 AND status = 'collecting'")
    .bind(digestId, past)
    .run()
  return past
}

/** The raw messages sent for a notification. */
export async function sentOf(id: string): Promise<string[]> {
  const { results } = await env.DB.prepare('SELECT raw FROM sent_messages WHERE notification_id = ?1')
    .bind(id)
    .all<{ raw: string }>()
  return results.map((row) => row.raw)
}

/** Closes a due digest by its message, then sends it by the message the close put back on the queue. */
export async function closeAndSend(digestId: string, due: string) {
  const closed = await dispatchOnce({ notificationId: digestId, due })
  const next = closed.enqueued.find((message) => message.body.notificationId === digestId)
  expect(next, 'the close puts the digest back on the queue').toBeDefined()
  const sent = await dispatchOnce(next?.body as { notificationId: string; due: string })
  return { closed, sent }
}
