/**
 * Batched sends through Resend's `POST /emails/batch`: exactly one email per
 * notification. The membership of a batch is written before its first
 * request, and every retry — after a lost answer, a crash, on another
 * delivery — sends the same members in the same order under the same key, or
 * nothing; a batch Resend refused as a whole lets its members go.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { FAKE_RESEND_TEAM_KEY_PREFIX, FAKE_RESEND_URL } from './fake-resend.ts'
import { dispatchBatch, eventually, guid } from './helpers.ts'

type Row = {
  id: string
  status: string
  provider_id: string | null
  batch_id: string | null
  batch_position: number | null
  send_alone: number
  send_attempts: number
  error_code: string | null
  scheduled_at: string
}

const resendEnv = (overrides: Record<string, string> = {}) => ({
  EMAIL_TRANSPORT: 'resend',
  RESEND_API_KEY: 'test-resend-key',
  RESEND_API_URL: FAKE_RESEND_URL,
  ...overrides,
})

/** Pending notifications due now, one per address, as materialize writes them. */
async function pending(...addresses: string[]): Promise<string[]> {
  const now = new Date().toISOString()
  const ids = addresses.map(() => `ntf_test_${guid().replaceAll('-', '')}`)
  await env.DB.batch(
    ids.map((id, index) =>
      env.DB.prepare(
        `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency,
           recipient_user_id, recipient_email, recipient_name, locale, time_zone, subject, text_body, html_body,
           template_version, status, scheduled_at, enqueued_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, 'http', 'InvitationCreated', 'email', 'normal', ?4, ?5, 'Михаил', 'ru',
           'Europe/Moscow', 'Вас пригласили в проект', 'Текст', '<p>Текст</p>', 1, 'pending', ?6, ?6, ?6, ?6)`,
      ).bind(id, `test:${id}`, guid(), guid(), addresses[index], now),
    ),
  )
  return ids
}

async function rows(ids: string[]): Promise<Row[]> {
  const found = await env.DB.prepare(
    'SELECT * FROM notifications WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY batch_position, id',
  )
    .bind(JSON.stringify(ids))
    .all<Row>()
  return ids.map((id) => found.results.find((row) => row.id === id) as Row)
}

/** Requests and emails the fake took for an Idempotency-Key. */
async function provider(key: string): Promise<{ requests: number; emails: number }> {
  const count = async (what: string) =>
    ((await (await fetch(`${FAKE_RESEND_URL}/control/${what}?key=${key}`)).json()) as { count: number }).count
  return { requests: await count('sends'), emails: await count('emails') }
}

/** Brings the retry time of these pending notifications to now; the messages the queue would deliver then. */
async function retryTimeReached(ids: string[]): Promise<{ notificationId: string; due: string }[]> {
  const due = new Date(Date.now() - 1).toISOString()
  await env.DB.prepare(
    "UPDATE notifications SET scheduled_at = ?2 WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'pending'",
  )
    .bind(JSON.stringify(ids), due)
    .run()
  return ids.map((notificationId) => ({ notificationId, due }))
}

const mail = (prefix: string) => `${prefix}-${guid().slice(0, 8)}@example.com`

describe('batched sends through Resend', () => {
  it('one dispatch batch is one POST /emails/batch under the batch id; each notification keeps its own provider id', async () => {
    const ids = await pending(mail('a'), mail('b'), mail('c'))
    const outcome = await dispatchBatch(
      ids.map((notificationId) => ({ notificationId })),
      resendEnv(),
    )
    expect(outcome.explicitAcks).toHaveLength(3)
    const sent = await rows(ids)
    const batchId = sent[0]?.batch_id as string
    expect(batchId).toMatch(/^bat_[0-9a-f]{32}$/)
    expect(sent.map((row) => [row.status, row.batch_id, row.batch_position, row.provider_id])).toEqual(
      ids.map((_, position) => ['sent', batchId, position, `re_${batchId}_${position}`]),
    )
    expect(await provider(batchId)).toEqual({ requests: 1, emails: 3 })
    for (const id of ids) expect(await provider(id)).toEqual({ requests: 0, emails: 0 })
    const batch = await env.DB.prepare('SELECT size, transport FROM send_batches WHERE id = ?1').bind(batchId).first()
    expect(batch).toEqual({ size: 3, transport: 'resend' })
    // Each keeps the exact message it was sent as.
    const kept = await env.DB.prepare(
      'SELECT count(*) AS n FROM sent_messages WHERE notification_id IN (SELECT value FROM json_each(?1))',
    )
      .bind(JSON.stringify(ids))
      .first<{ n: number }>()
    expect(kept?.n).toBe(3)
  })

  it('by default (SENT_MESSAGE_RETENTION_DAYS 0) keeps no exact message: every member is marked sent all the same', async () => {
    const ids = await pending(mail('a'), mail('b'), mail('c'))
    const outcome = await dispatchBatch(
      ids.map((notificationId) => ({ notificationId })),
      { ...resendEnv(), SENT_MESSAGE_RETENTION_DAYS: '0' },
    )
    expect(outcome.explicitAcks).toHaveLength(3)
    const sent = await rows(ids)
    const batchId = sent[0]?.batch_id as string
    expect(sent.map((row) => [row.status, row.provider_id])).toEqual(
      ids.map((_, position) => ['sent', `re_${batchId}_${position}`]),
    )
    const kept = await env.DB.prepare(
      'SELECT count(*) AS n FROM sent_messages WHERE notification_id IN (SELECT value FROM json_each(?1))',
    )
      .bind(JSON.stringify(ids))
      .first<{ n: number }>()
    expect(kept?.n).toBe(0)
  })

  it('a lost answer: the retry of any member sends the same batch under the same key, and nothing twice', async () => {
    const ids = await pending(mail('lostanswer'), mail('b'), mail('c'))
    const first = await dispatchBatch(
      ids.map((notificationId) => ({ notificationId })),
      resendEnv(),
    )
    const waiting = await rows(ids)
    const batchId = waiting[0]?.batch_id as string
    expect(waiting.map((row) => [row.status, row.batch_id, row.send_attempts])).toEqual(
      ids.map(() => ['pending', batchId, 1]),
    )
    expect(first.enqueued.map((message) => message.body.notificationId).sort()).toEqual([...ids].sort())
    expect(await provider(batchId)).toEqual({ requests: 1, emails: 3 })

    // Only the second member's message comes back: it takes the whole batch with it.
    const messages = await retryTimeReached(ids)
    await dispatchBatch([messages[1] as { notificationId: string; due: string }], resendEnv())
    const sent = await rows(ids)
    expect(sent.map((row) => [row.status, row.batch_id, row.batch_position, row.provider_id])).toEqual(
      ids.map((_, position) => ['sent', batchId, position, `re_${batchId}_${position}`]),
    )
    // The same request again, answered with the first answer: three emails, not six.
    expect(await provider(batchId)).toEqual({ requests: 2, emails: 3 })

    // The other members' messages find them sent: nothing more goes out.
    const late = await dispatchBatch(
      [messages[0], messages[2]] as { notificationId: string; due: string }[],
      resendEnv(),
    )
    expect(late.explicitAcks).toHaveLength(2)
    expect(await provider(batchId)).toEqual({ requests: 2, emails: 3 })
  })

  it('a notification whose lone send lost its answer is retried alone under its own key, never in a batch', async () => {
    const [lone] = await pending(mail('lostanswer'))
    await dispatchBatch([{ notificationId: lone as string }], resendEnv())
    expect(await provider(lone as string)).toEqual({ requests: 1, emails: 1 })
    const others = await pending(mail('b'), mail('c'))
    const [retry] = await retryTimeReached([lone as string])
    await dispatchBatch(
      [retry as { notificationId: string; due: string }, ...others.map((notificationId) => ({ notificationId }))],
      resendEnv(),
    )
    const [loneRow, ...batched] = await rows([lone as string, ...others])
    // The same request again: Resend answers it with its first answer, one email.
    expect(loneRow).toMatchObject({ status: 'sent', batch_id: null, provider_id: `re_${lone}` })
    expect(await provider(lone as string)).toEqual({ requests: 2, emails: 1 })
    const batchId = batched[0]?.batch_id as string
    expect(batched.map((row) => [row.status, row.batch_id])).toEqual([
      ['sent', batchId],
      ['sent', batchId],
    ])
    expect(await provider(batchId)).toEqual({ requests: 1, emails: 2 })
  })

  it('after a crash between writing the membership and the request, the batch is sent as it was written', async () => {
    const ids = await pending(mail('a'), mail('b'), mail('c'))
    const batchId = `bat_${guid().replaceAll('-', '')}`
    const past = new Date(Date.now() - 60_000).toISOString()
    // What a delivery that died right after writing its batch leaves: members `sending`, their lease over.
    await env.DB.batch([
      env.DB.prepare("INSERT INTO send_batches (id, transport, size, created_at) VALUES (?1, 'resend', 3, ?2)").bind(
        batchId,
        past,
      ),
      ...ids.map((id, position) =>
        env.DB.prepare(
          `UPDATE notifications SET status = 'sending', claim_token = 'dead', lease_until = ?3, send_attempts = 1,
             batch_id = ?2, batch_position = ?4 WHERE id = ?1`,
        ).bind(id, batchId, past, 2 - position),
      ),
    ])
    await dispatchBatch([{ notificationId: ids[0] as string }], resendEnv())
    const sent = await rows(ids)
    // In the written order (the positions), under the written key.
    expect(sent.map((row) => [row.status, row.provider_id])).toEqual([
      ['sent', `re_${batchId}_2`],
      ['sent', `re_${batchId}_1`],
      ['sent', `re_${batchId}_0`],
    ])
    expect(await provider(batchId)).toEqual({ requests: 1, emails: 3 })
  })

  it('while another delivery holds a part of the batch, this one gives back what it took, its attempt not counted', async () => {
    const ids = await pending(mail('transient'), mail('b'))
    await dispatchBatch(
      ids.map((notificationId) => ({ notificationId })),
      resendEnv(),
    )
    const [firstRow] = await rows(ids)
    const batchId = firstRow?.batch_id as string
    expect(await provider(batchId)).toEqual({ requests: 1, emails: 0 })
    const messages = await retryTimeReached(ids)
    await env.DB.prepare(
      "UPDATE notifications SET status = 'sending', claim_token = 'other', lease_until = ?2 WHERE id = ?1",
    )
      .bind(ids[1], new Date(Date.now() + 120_000).toISOString())
      .run()
    const outcome = await dispatchBatch([messages[0] as { notificationId: string; due: string }], resendEnv())
    expect(await provider(batchId)).toEqual({ requests: 1, emails: 0 })
    const [mine] = await rows(ids)
    expect(mine).toMatchObject({ status: 'pending', send_attempts: 1, batch_id: batchId })
    expect(outcome.enqueued).toEqual([{ body: messages[0], delaySeconds: 30 }])
  })

  it('a batch refused as invalid (422) sent nothing: its members go alone, and only the invalid one fails', async () => {
    const ids = await pending(mail('a'), mail('permanent'), mail('c'))
    await dispatchBatch(
      ids.map((notificationId) => ({ notificationId })),
      resendEnv(),
    )
    const refused = await rows(ids)
    expect(refused.map((row) => [row.status, row.batch_id, row.send_alone, row.error_code])).toEqual(
      ids.map(() => ['pending', null, 1, 'NTF_BATCH_REFUSED']),
    )
    const again = await dispatchBatch(await retryTimeReached(ids), resendEnv())
    const after = await rows(ids)
    expect(after.map((row) => [row.status, row.batch_id, row.provider_id])).toEqual([
      ['sent', null, `re_${ids[0]}`],
      ['failed', null, null],
      ['sent', null, `re_${ids[2]}`],
    ])
    expect(after[1]?.error_code).toBe('NTF_SEND_PERMANENT')
    expect(again.explicitAcks).toHaveLength(3)
    await eventually(async () => {
      const letter = await env.DB.prepare('SELECT code FROM dead_letters WHERE body LIKE ?1')
        .bind(`%${ids[1]}%`)
        .first<{ code: string }>()
      expect(letter?.code).toBe('NTF_SEND_PERMANENT')
    })
  })

  it('a rate limit on a batch sent nothing: its members leave it and wait for the retry-after', async () => {
    const ids = await pending(mail('ratelimited'), mail('b'))
    const before = Date.now()
    // A team of its own: the hour this 429 asks for holds every send of its account (src/dispatch/pace/).
    await dispatchBatch(
      ids.map((notificationId) => ({ notificationId })),
      resendEnv({ RESEND_API_KEY: `${FAKE_RESEND_TEAM_KEY_PREFIX}batch-${guid().slice(0, 8)}` }),
    )
    for (const row of await rows(ids)) {
      expect(row).toMatchObject({ status: 'pending', batch_id: null, send_alone: 0, error_code: 'NTF_SEND_TRANSIENT' })
      expect(Date.parse(row.scheduled_at)).toBeGreaterThanOrEqual(before + 3_600_000)
    }
  })

  it('RESEND_BATCH_SIZE=1 sends each alone under its own id', async () => {
    const ids = await pending(mail('a'), mail('b'))
    await dispatchBatch(
      ids.map((notificationId) => ({ notificationId })),
      resendEnv({ RESEND_BATCH_SIZE: '1' }),
    )
    const sent = await rows(ids)
    expect(sent.map((row) => [row.status, row.batch_id, row.provider_id])).toEqual(
      ids.map((id) => ['sent', null, `re_${id}`]),
    )
  })
})
