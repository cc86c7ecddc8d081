/**
 * Dispatch into the in-app feeds (src/dispatch/transports/in-app.ts): an
 * `in-app` notification becomes one item of its recipient's feed however often
 * it is delivered, and what belongs to email — a paused transport, a suppressed
 * address, an unknown outcome, a bundle — neither holds it back nor takes it
 * in. Through the real notify-dispatch consumer, D1 and the INBOX Durable
 * Object of wrangler.toml.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { FAKE_RESEND_URL } from './fake-resend.ts'
import { dispatchBatch, dispatchOnce, guid, pendingNotification } from './helpers.ts'
import { dbOfUser } from './shards.ts'

type Row = {
  status: string
  transport: string | null
  provider_id: string | null
  error_code: string | null
  maybe_sent_at: string | null
}

const ITEM = {
  title: 'Вас пригласили в проект',
  body: 'Анна пригласила вас в проект «Логотип».',
  extras: JSON.stringify({ link: 'https://arthunt.example/projects/1', action: null }),
}

async function rowOf(userId: string, id: string): Promise<Row> {
  return (await (
    await dbOfUser(userId)
  )
    .prepare('SELECT status, transport, provider_id, error_code, maybe_sent_at FROM notifications WHERE id = ?1')
    .bind(id)
    .first<Row>()) as Row
}

async function inAppFor(userId: string, item = ITEM): Promise<string> {
  return pendingNotification(`${userId}@example.com`, { userId, inApp: item })
}

async function feedOf(userId: string) {
  return env.INBOX.getByName(userId).page({ limit: 100, archived: true })
}

describe('in-app notifications through notify-dispatch', () => {
  it('become one item of the recipient’s feed, however often they are delivered or taken over', async () => {
    const userId = `inapp-${guid()}`
    const id = await inAppFor(userId)
    await dispatchOnce({ notificationId: id })
    expect(await rowOf(userId, id)).toMatchObject({ status: 'sent', transport: 'in-app', provider_id: null })
    const feed = await feedOf(userId)
    expect(feed.items).toEqual([
      expect.objectContaining({
        id,
        title: ITEM.title,
        body: ITEM.body,
        link: 'https://arthunt.example/projects/1',
        action: null,
      }),
    ])
    // A claim whose lease ran out with its answer lost: the binding's email would wait `unknown`; an item
    // is added again, which adds nothing.
    const db = await dbOfUser(userId)
    const past = new Date(Date.now() - 60_000).toISOString()
    await db
      .prepare("UPDATE notifications SET status = 'sending', lease_until = ?2, claimed_at = ?2 WHERE id = ?1")
      .bind(id, past)
      .run()
    await dispatchOnce({ notificationId: id }, { EMAIL_TRANSPORT: 'cloudflare' })
    expect(await rowOf(userId, id)).toMatchObject({ status: 'sent', transport: 'in-app' })
    expect((await feedOf(userId)).items.map((item) => item.id)).toEqual([id])
    expect((await feedOf(userId)).counts).toEqual({ unseen: 1, unread: 1 })
  })

  it('go on while the email transport is paused, and do not end its pause', async () => {
    const userId = `paused-${guid()}`
    const db = await dbOfUser(userId)
    const now = new Date().toISOString()
    const later = new Date(Date.now() + 3_600_000).toISOString()
    for (const shard of new Set([db, env.DB])) {
      await shard
        .prepare(
          `INSERT OR REPLACE INTO transport_pauses (transport, code, reason, since, failures, probe_at, probe_id, updated_at)
           VALUES ('cloudflare', 'E_SENDER_NOT_VERIFIED', 'the sender is not verified', ?1, 1, ?2, NULL, ?1)`,
        )
        .bind(now, later)
        .run()
    }
    const item = await inAppFor(userId)
    const email = await pendingNotification(`${userId}@example.com`, { userId })
    await dispatchBatch([{ notificationId: item }, { notificationId: email }], { EMAIL_TRANSPORT: 'cloudflare' })
    expect((await rowOf(userId, item)).status).toBe('sent')
    expect((await rowOf(userId, email)).status).toBe('paused')
    const pause = await db.prepare("SELECT code FROM transport_pauses WHERE transport = 'cloudflare'").first()
    expect(pause).toEqual({ code: 'E_SENDER_NOT_VERIFIED' })
    expect((await feedOf(userId)).items.map((entry) => entry.id)).toEqual([item])
  })

  it('are not held by a suppressed address, which is email’s', async () => {
    const userId = `suppressed-${guid()}`
    const address = `${userId}@example.com`
    const db = await dbOfUser(userId)
    const now = new Date().toISOString()
    await db
      .prepare(
        `INSERT INTO suppressions (address, cause, reason, until, source, created_at, updated_at)
         VALUES (?1, 'hard-bounce', 'mailbox does not exist', NULL, 'operator', ?2, ?2)`,
      )
      .bind(address, now)
      .run()
    const item = await inAppFor(userId)
    const email = await pendingNotification(address, { userId })
    await dispatchBatch([{ notificationId: item }, { notificationId: email }])
    expect((await rowOf(userId, item)).status).toBe('sent')
    expect((await rowOf(userId, email)).status).toBe('suppressed')
  })

  it('join no Resend bundle: the emails of the batch go in one request, the items to their feeds', async () => {
    const userId = `bundled-${guid()}`
    const item = await inAppFor(userId)
    const emails = [
      await pendingNotification(`a-${userId}@example.com`, { userId }),
      await pendingNotification(`b-${userId}@example.com`, { userId }),
    ]
    await dispatchBatch(
      [item, ...emails].map((notificationId) => ({ notificationId })),
      { EMAIL_TRANSPORT: 'resend', RESEND_API_KEY: 'test-resend-key', RESEND_API_URL: FAKE_RESEND_URL },
    )
    const db = await dbOfUser(userId)
    const rows = await db
      .prepare('SELECT id, status, transport, batch_id FROM notifications WHERE recipient_user_id = ?1')
      .bind(userId)
      .all<{ id: string; status: string; transport: string; batch_id: string | null }>()
    const byId = new Map(rows.results.map((row) => [row.id, row]))
    expect(byId.get(item)).toMatchObject({ status: 'sent', transport: 'in-app', batch_id: null })
    for (const email of emails) expect(byId.get(email)).toMatchObject({ status: 'sent', transport: 'resend' })
    expect(new Set(emails.map((email) => byId.get(email)?.batch_id)).size).toBe(1)
  })

  it('end failed as a dead letter when the feed cannot take the item, never tried again', async () => {
    const userId = `invalid-${guid()}`
    const id = await inAppFor(userId, { ...ITEM, extras: JSON.stringify({ link: 'javascript:alert(1)' }) })
    await dispatchOnce({ notificationId: id })
    expect(await rowOf(userId, id)).toMatchObject({ status: 'failed', error_code: 'NTF_MESSAGE_INVALID' })
    expect((await feedOf(userId)).items).toEqual([])
  })
})
