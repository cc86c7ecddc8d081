import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { pauseGate } from '../src/dispatch/pause.ts'
import { claimNotifications, supersedeDecision } from '../src/notifications/claim.ts'
import { recipientGate, unknownOutcomeGate } from '../src/notifications/gates.ts'
import { dispatchBatch, guid, pendingNotification } from './helpers.ts'

/**
 * The claim runs each of its statements once over the whole consumer batch
 * (src/dispatch/stages/claim.ts), not once per message: these batches mix what
 * a per-message claim kept apart — the same notification twice, a stale
 * message beside its current one, a gate beside a claim, and the two
 * notifications of one verification decision.
 */

type Row = { status: string; send_attempts: number; error_code: string | null }

async function rowOf(id: string): Promise<Row> {
  return (await env.DB.prepare('SELECT status, send_attempts, error_code FROM notifications WHERE id = ?1')
    .bind(id)
    .first<Row>()) as Row
}

async function sentCount(id: string): Promise<number> {
  const row = await env.DB.prepare('SELECT count(*) AS n FROM sent_messages WHERE notification_id = ?1')
    .bind(id)
    .first<{ n: number }>()
  return row?.n ?? 0
}

async function scheduledAt(id: string): Promise<string> {
  const row = await env.DB.prepare('SELECT scheduled_at FROM notifications WHERE id = ?1')
    .bind(id)
    .first<{ scheduled_at: string }>()
  return row?.scheduled_at as string
}

/**
 * Makes a pending notification one side of a verification decision of
 * `person`: the authoritative one (from verification-requests) or its
 * fallback (from person-upserted); `providerId` marks a fallback whose earlier
 * send had an unknown outcome, which is sent again rather than superseded.
 */
async function decisionSide(
  id: string,
  person: string,
  side: { fallback: boolean; providerId?: string },
): Promise<void> {
  await env.DB.prepare(
    `UPDATE notifications SET is_fallback = ?2, decision_person = ?3, decision_request = NULL, decision_at = ?4,
       provider_id = ?5 WHERE id = ?1`,
  )
    .bind(id, side.fallback ? 1 : 0, person, new Date().toISOString(), side.providerId ?? null)
    .run()
}

describe('one claim over a whole consumer batch', () => {
  it('duplicates, a stale message, a suppressed address and a later one in one batch: each gets its own outcome, one email each', async () => {
    const tag = guid().slice(0, 8)
    const twice = await pendingNotification(`twice-${tag}@example.com`)
    const restamped = await pendingNotification(`restamped-${tag}@example.com`)
    const suppressed = await pendingNotification(`suppressed-${tag}@example.com`)
    const later = await pendingNotification(`later-${tag}@example.com`, {
      scheduledAt: new Date(Date.now() + 3_600_000).toISOString(),
    })
    const now = new Date().toISOString()
    await env.DB.prepare(
      `INSERT INTO suppressions (address, cause, reason, until, source, created_at, updated_at)
       VALUES (?1, 'hard-bounce', 'test', NULL, 'operator', ?2, ?2)`,
    )
      .bind(`suppressed-${tag}@example.com`, now)
      .run()
    const due = await scheduledAt(restamped)
    const result = await dispatchBatch([
      { notificationId: twice },
      // A message of an earlier time of the same notification, before the one of its time.
      { notificationId: restamped, due: new Date(Date.parse(due) - 60_000).toISOString() },
      { notificationId: restamped, due },
      { notificationId: suppressed },
      { notificationId: twice },
      { notificationId: later },
    ])
    expect(result.explicitAcks).toHaveLength(6)
    expect(result.retryMessages).toEqual([])
    expect(await rowOf(twice)).toMatchObject({ status: 'sent', send_attempts: 1 })
    expect(await sentCount(twice)).toBe(1)
    expect(await rowOf(restamped)).toMatchObject({ status: 'sent', send_attempts: 1 })
    expect(await sentCount(restamped)).toBe(1)
    expect(await rowOf(suppressed)).toMatchObject({ status: 'suppressed', error_code: 'NTF_RECIPIENT_SUPPRESSED' })
    expect(await sentCount(suppressed)).toBe(0)
    expect(await rowOf(later)).toMatchObject({ status: 'pending', send_attempts: 0 })
    expect(result.enqueued.map((message) => message.body)).toEqual([
      { notificationId: later, due: await scheduledAt(later) },
    ])
  })

  it('an authoritative decision and its fallback that may have gone out, in one batch in either order: one is sent, the other waits', async () => {
    for (const authoritativeFirst of [true, false]) {
      const person = guid()
      const authoritative = await pendingNotification(`decision-${person.slice(0, 8)}@example.com`)
      const fallback = await pendingNotification(`decision-${person.slice(0, 8)}@example.com`)
      await decisionSide(authoritative, person, { fallback: false })
      await decisionSide(fallback, person, { fallback: true, providerId: `<${fallback}@notify-edge.example>` })
      const order = authoritativeFirst ? [authoritative, fallback] : [fallback, authoritative]
      const result = await dispatchBatch(order.map((notificationId) => ({ notificationId })))
      expect(result.explicitAcks).toHaveLength(2)
      // The fallback that may have gone out is sent again under its Message-ID; the authoritative
      // decision is held while it is in flight, and asks again later.
      expect(await rowOf(fallback)).toMatchObject({ status: 'sent' })
      expect(await sentCount(fallback)).toBe(1)
      expect(await rowOf(authoritative)).toMatchObject({ status: 'pending', send_attempts: 0 })
      expect(await sentCount(authoritative)).toBe(0)
      expect(result.enqueued.map((message) => message.body)).toEqual([
        { notificationId: authoritative, due: await scheduledAt(authoritative) },
      ])
    }
  })
})

describe('one email per decision across claims', () => {
  it('a fallback that may have gone out is not sent again once its authoritative decision was sent: superseded, no second email', async () => {
    const person = guid()
    const authoritative = await pendingNotification(`decision-${person.slice(0, 8)}@example.com`)
    await decisionSide(authoritative, person, { fallback: false })
    await dispatchBatch([{ notificationId: authoritative }])
    expect(await rowOf(authoritative)).toMatchObject({ status: 'sent' })
    const fallback = await pendingNotification(`decision-${person.slice(0, 8)}@example.com`)
    await decisionSide(fallback, person, { fallback: true, providerId: `<${fallback}@notify-edge.example>` })
    const result = await dispatchBatch([{ notificationId: fallback }])
    expect(result.explicitAcks).toHaveLength(1)
    expect(await rowOf(fallback)).toMatchObject({ status: 'superseded', send_attempts: 0 })
    expect(await sentCount(fallback)).toBe(0)
  })

  it('a fallback that may have gone out waits while its authoritative decision is in flight, and is superseded once it is sent', async () => {
    const person = guid()
    const authoritative = await pendingNotification(`decision-${person.slice(0, 8)}@example.com`)
    await decisionSide(authoritative, person, { fallback: false })
    const lease = new Date(Date.now() + 600_000).toISOString()
    // Another delivery holds the authoritative decision's claim.
    await env.DB.prepare(
      "UPDATE notifications SET status = 'sending', lease_until = ?2, claim_token = 'elsewhere' WHERE id = ?1",
    )
      .bind(authoritative, lease)
      .run()
    const fallback = await pendingNotification(`decision-${person.slice(0, 8)}@example.com`)
    await decisionSide(fallback, person, { fallback: true, providerId: `<${fallback}@notify-edge.example>` })
    const held = await dispatchBatch([{ notificationId: fallback }])
    expect(await rowOf(fallback)).toMatchObject({ status: 'pending', send_attempts: 0 })
    expect(held.enqueued.map((message) => message.body)).toEqual([
      { notificationId: fallback, due: await scheduledAt(fallback) },
    ])
    await env.DB.prepare("UPDATE notifications SET status = 'sent', lease_until = NULL WHERE id = ?1")
      .bind(authoritative)
      .run()
    await dispatchBatch([{ notificationId: fallback }])
    expect(await rowOf(fallback)).toMatchObject({ status: 'superseded' })
    expect(await sentCount(fallback)).toBe(0)
  })
})

/** The claim's statements (src/dispatch/stages/claim.ts, in its order) over `claims`, as one D1 batch. */
function claimBundle(claims: { id: string; due: string | null }[], token: string): Promise<D1Result[]> {
  const now = new Date().toISOString()
  const batch = JSON.stringify(claims.map((claim) => ({ ...claim, messageId: `<${claim.id}@notify-edge.example>` })))
  const lease = new Date(Date.now() + 60_000).toISOString()
  return env.DB.batch([
    supersedeDecision(env.DB, batch, now, 60),
    recipientGate(env.DB, batch, now, ['InvitationCreated']),
    unknownOutcomeGate(env.DB, batch, now, now, '["resend"]', '["resend"]'),
    pauseGate(env.DB, batch, now, '["resend"]'),
    claimNotifications(env.DB, batch, now, lease, token, 60, false, 1, '["resend"]'),
    claimNotifications(env.DB, batch, now, lease, token, 60, true, 1, '["resend"]'),
  ])
}

const rowsRead = (results: D1Result[]) => results.reduce((sum, result) => sum + result.meta.rows_read, 0)

describe('a decision held while its other side may have gone out', () => {
  it('an authoritative decision waits while its fallback that may have gone out is pending to be sent again; the fallback goes, and the decision is superseded', async () => {
    const person = guid()
    const authoritative = await pendingNotification(`decision-${person.slice(0, 8)}@example.com`)
    const fallback = await pendingNotification(`decision-${person.slice(0, 8)}@example.com`)
    await decisionSide(authoritative, person, { fallback: false })
    await decisionSide(fallback, person, { fallback: true, providerId: `<${fallback}@notify-edge.example>` })
    // As the cron leaves a notification whose message it re-enqueued long ago.
    await env.DB.prepare('UPDATE notifications SET enqueued_at = NULL WHERE id = ?1').bind(authoritative).run()
    // Only the authoritative decision's message arrives first.
    const held = await dispatchBatch([{ notificationId: authoritative }])
    expect(held.explicitAcks).toHaveLength(1)
    expect(await rowOf(authoritative)).toMatchObject({ status: 'pending', send_attempts: 0 })
    expect(await sentCount(authoritative)).toBe(0)
    expect(held.enqueued.map((message) => message.body)).toEqual([
      { notificationId: authoritative, due: await scheduledAt(authoritative) },
    ])
    // Its message went back on the queue: stamped, so the cron does not start a second one beside it.
    const stamped = await env.DB.prepare('SELECT enqueued_at FROM notifications WHERE id = ?1')
      .bind(authoritative)
      .first<{ enqueued_at: string }>()
    expect(stamped?.enqueued_at).not.toBeNull()
    expect(Date.parse(stamped?.enqueued_at as string)).toBeGreaterThan(Date.now() - 60_000)
    await dispatchBatch([{ notificationId: fallback }])
    expect(await rowOf(fallback)).toMatchObject({ status: 'sent' })
    await dispatchBatch([{ notificationId: authoritative }])
    expect(await rowOf(authoritative)).toMatchObject({ status: 'superseded' })
    expect(await sentCount(authoritative)).toBe(0)
  })
})

describe('what a claim reads (D1 bills rows read)', () => {
  it('a claim batch reads rows for its own notifications, not for the backlog of due ones beside them', async () => {
    const tag = guid().slice(0, 8)
    // A backlog: 200 notifications due and waiting, none of them in the batch.
    await Promise.all(
      Array.from({ length: 200 }, (_, index) => pendingNotification(`backlog-${index}-${tag}@example.com`)),
    )
    const ids = [
      await pendingNotification(`one-${tag}@example.com`),
      await pendingNotification(`two-${tag}@example.com`),
    ]
    const results = await claimBundle(
      ids.map((id) => ({ id, due: null })),
      `token-${tag}`,
    )
    expect(results[4]?.results).toHaveLength(2)
    // Each statement looks the batch's two ids up by primary key: 8 to 15 rows each here (D1 counts
    // json_each's and the subqueries' rows too), 60 in all. Scanning the due index, as the planner
    // chose before STATUS_AS_FILTER (src/sql.ts), read the backlog in each: about 1,050 in all. All six
    // statements together read less than the backlog once.
    expect(rowsRead(results)).toBeLessThan(200)
  })

  it('a claim batch of 100 reads in proportion to its size, not to its square', async () => {
    const tag = guid().slice(0, 8)
    const ids = await Promise.all(
      Array.from({ length: 100 }, (_, index) => pendingNotification(`hundred-${index}-${tag}@example.com`)),
    )
    const { results: rows } = await env.DB.prepare(
      'SELECT id, scheduled_at FROM notifications WHERE id IN (SELECT value FROM json_each(?1))',
    )
      .bind(JSON.stringify(ids))
      .all<{ id: string; scheduled_at: string }>()
    const results = await claimBundle(
      rows.map((row) => ({ id: row.id, due: row.scheduled_at })),
      `token-${tag}`,
    )
    expect(results[4]?.results).toHaveLength(100)
    // About 25 rows per notification for the six statements. Matching each row to the message
    // that names its due time with a subquery correlated with the row read the batch's list once
    // per row: 5,650 rows for the claim statement alone, about 75 per notification in all.
    expect(rowsRead(results)).toBeLessThan(40 * 100)
  })
})
