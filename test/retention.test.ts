/**
 * Retention: the cron prunes each kind of data once it is past its retention,
 * a bounded chunk per run, and never touches a notification that may still be
 * sent. The rows here are written straight into D1 with timestamps decades
 * old, older than anything the rest of this file writes, so each run's chunk
 * (oldest first) is made of them.
 */
import { createExecutionContext, createMessageBatch } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import worker from '../src/index.ts'
import { NOTIFICATION_STATUSES } from '../src/notifications/status.ts'
import { deadLetterEnvelope } from '../src/queue/dead-letter-envelope.ts'
import { ADMIN_TOKEN, consolePage, guid, runCron } from './helpers.ts'
import { shardDbs } from './shards.ts'
import { fetchWorker } from './worker-fetch.ts'

const DAY_MS = 86_400_000
const FUTURE = '2100-01-01T00:00:00.000Z'

/** A notification row with every content column filled, created at `createdAt`. */
async function insertNotification(id: string, status: string, createdAt: string): Promise<void> {
  await env.DB.prepare(
    `INSERT INTO notifications
       (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id, recipient_email,
        recipient_name, locale, time_zone, subject, text_body, html_body, template_version, status, scheduled_at,
        enqueued_at, lease_until, created_at, updated_at, unsubscribe_url, recipient_hash, model, is_digest,
        digest_id)
     VALUES (?1, 'key:' || ?1, 'event:' || ?1, 'http', 'InvitationCreated', 'email', 'normal', 'user:' || ?1,
        'retention-' || ?1 || '@example.com', 'Тест Пользователь', 'ru', 'Europe/Moscow', 'Subject', 'Text',
        '<p>HTML</p>', 1, ?2, ?4, ?4, ?4, ?3, ?3, 'https://notify-edge.example.workers.dev/u/x', 'hmac:00', '{}',
        CASE WHEN ?2 IN ('collecting', 'closing') THEN 1 ELSE 0 END, CASE WHEN ?2 = 'digested' THEN 'digest:' || ?1 END)`,
  )
    // Not due and leased far ahead: the cron's search for lost notifications leaves these alone.
    .bind(id, status, createdAt, FUTURE)
    .run()
}

type Row = Record<string, string | number | null>

async function notification(id: string): Promise<Row> {
  return (await env.DB.prepare('SELECT * FROM notifications WHERE id = ?1').bind(id).first<Row>()) as Row
}

const CONTENT = [
  'recipient_email',
  'recipient_name',
  'time_zone',
  'subject',
  'text_body',
  'html_body',
  'unsubscribe_url',
  'recipient_hash',
  'model',
]

async function countOf(sql: string, ...bindings: unknown[]): Promise<number> {
  return Number(
    (
      await env.DB.prepare(sql)
        .bind(...bindings)
        .first<{ n: number }>()
    )?.n,
  )
}

/** A dead letter of a failed send of notification `id`, and the answer to its replay. */
async function replayFailedSend(id: string): Promise<{ answer: Response; letter: string }> {
  const envelope = deadLetterEnvelope(
    'notify-dispatch',
    { id: guid(), attempts: 10, body: { notificationId: id } },
    { code: 'NTF_SEND_TRANSIENT', error: 'test: the provider failed ten times' },
  )
  createExecutionContext()
  await worker.queue(
    createMessageBatch('notify-dlq', [{ id: `dlq-${guid()}`, timestamp: new Date(), attempts: 1, body: envelope }]),
    env,
  )
  const { id: letter } = (await env.DB.prepare('SELECT id FROM dead_letters WHERE body LIKE ?1')
    .bind(`%${id}%`)
    .first<{ id: string }>()) as { id: string }
  const answer = await fetchWorker(`/v1/dead-letters/${letter}/replay`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  })
  return { answer, letter }
}

describe('retention', () => {
  it('removes the content of final notifications past their content retention, keeps their rows, and keeps every other notification whole', async () => {
    const prefix = guid().slice(0, 8)
    const old = '2000-01-01T00:00:00.000Z'
    for (const status of NOTIFICATION_STATUSES) await insertNotification(`${prefix}-old-${status}`, status, old)
    const recent = new Date(Date.now() - 89 * DAY_MS).toISOString()
    await insertNotification(`${prefix}-recent-sent`, 'sent', recent)
    // The paused one is held by a pause of the configured transport, probed only much later (else the
    // cron would release it as no pause's).
    const farOff = new Date(Date.now() + DAY_MS).toISOString()
    await env.DB.prepare(
      `INSERT INTO transport_pauses (transport, code, reason, since, failures, probe_at, updated_at)
       VALUES ('cloudflare', 'test', 'test', ?1, 1, ?1, ?1)`,
    )
      .bind(farOff)
      .run()

    // Content kept 90 days, rows a century: this is about the content alone.
    await runCron(new Date(), { NOTIFICATION_CONTENT_RETENTION_DAYS: '90', NOTIFICATION_RETENTION_DAYS: '36500' })
    await env.DB.prepare("DELETE FROM transport_pauses WHERE code = 'test'").run()

    const final = [
      ...['sent', 'failed', 'undeliverable', 'superseded', 'suppressed', 'opted-out', 'digested', 'throttled'],
      ...['seen-in-app', 'cancelled'],
    ]
    for (const status of NOTIFICATION_STATUSES) {
      const row = await notification(`${prefix}-old-${status}`)
      // The row itself stays: its status, kind, recipient id and times.
      expect(row).toMatchObject({
        status,
        kind: 'InvitationCreated',
        recipient_user_id: `user:${prefix}-old-${status}`,
      })
      expect(row.created_at).toBe(old)
      if (final.includes(status)) {
        for (const column of CONTENT) expect(row[column], `${status}: ${column}`).toBeNull()
        expect(row.content_removed_by).toBe('retention')
      } else {
        // pending, sending, paused, awaiting-contact, unknown, escalating, a digest collecting or
        // closing: may still be sent, so kept whole.
        for (const column of CONTENT) expect(row[column], `${status}: ${column}`).not.toBeNull()
        expect(row.content_removed_at).toBeNull()
      }
    }
    const young = await notification(`${prefix}-recent-sent`)
    expect(young.subject).toBe('Subject')
    expect(young.content_removed_at).toBeNull()
  })

  it('prunes each kind of data a bounded chunk per run, oldest first, and leaves the rest to the next run', async () => {
    const tag = guid().slice(0, 8)
    const at = (index: number) => new Date(Date.UTC(1990, 0, 1) + index * 1000).toISOString()
    const statements: D1PreparedStatement[] = []
    for (let index = 0; index < 25; index += 1) {
      const id = `${tag}-${index}`
      statements.push(
        env.DB.prepare(
          `INSERT INTO processed_marks (idempotency_key, event_id, contract, event_type, source, origin,
             source_message_id, outcome, received_at, processed_at)
           VALUES (?1, ?1, 'arthunt', 'response.created', 'http', 'test', ?1, 'enqueued', ?2, ?2)`,
        ).bind(`chunk:${id}`, at(index)),
        env.DB.prepare(
          `INSERT INTO sent_messages (notification_id, transport, message_id, raw, sent_at)
           VALUES (?1, 'cloudflare', ?1, 'raw MIME', ?2)`,
          // Of no notification here: these age out by their own retention alone, not with a row.
        ).bind(`chunk-mime:${id}`, at(index)),
        env.DB.prepare(
          `INSERT INTO delivery_events (provider, provider_event_id, provider_message_id, type, status, occurred_at,
             received_at, detail)
           VALUES ('resend', ?1, ?1, 'email.delivered', 'delivered', ?2, ?2, '{}')`,
        ).bind(`chunk:${id}`, at(index)),
        env.DB.prepare(
          `INSERT INTO dead_letters (id, queue, code, error, body, history, failure_id, first_seen, last_seen, status,
             resolved_at)
           VALUES (?1, 'notify-events', 'NTF_TEST_CHUNK', 'test', '{}', '[]', ?1, ?2, ?2, 'discarded', ?2)`,
        ).bind(`chunk:${id}`, at(index)),
        env.DB.prepare("INSERT INTO send_batches (id, transport, size, created_at) VALUES (?1, 'resend', 2, ?2)").bind(
          `chunk:${id}`,
          at(index),
        ),
        env.DB.prepare(
          `INSERT INTO audit_log (at, actor, role, via, action, target, affected)
           VALUES (?1, 'admin token', 'admin', 'api', 'test.chunk', ?2, 1)`,
        ).bind(at(index), `chunk:${id}`),
      )
      await insertNotification(`chunk:${id}`, 'sent', at(index))
    }
    // Open dead letters wait for an operator however old they are.
    for (let index = 0; index < 3; index += 1) {
      statements.push(
        env.DB.prepare(
          `INSERT INTO dead_letters (id, queue, code, error, body, history, failure_id, first_seen, last_seen)
           VALUES (?1, 'notify-events', 'NTF_TEST_CHUNK', 'test', '{}', '[]', ?1, ?2, ?2)`,
        ).bind(`chunk-open:${tag}-${index}`, at(index)),
      )
    }
    await env.DB.batch(statements)

    const like = `chunk:${tag}-%`
    const left = async () => ({
      processed_marks: await countOf('SELECT count(*) AS n FROM processed_marks WHERE idempotency_key LIKE ?1', like),
      notifications: await countOf(
        'SELECT count(*) AS n FROM notifications WHERE id LIKE ?1 AND content_removed_at IS NULL',
        like,
      ),
      sent_messages: await countOf(
        'SELECT count(*) AS n FROM sent_messages WHERE notification_id LIKE ?1',
        `chunk-mime:${tag}-%`,
      ),
      delivery_events: await countOf('SELECT count(*) AS n FROM delivery_events WHERE provider_event_id LIKE ?1', like),
      dead_letters: await countOf('SELECT count(*) AS n FROM dead_letters WHERE id LIKE ?1', like),
      send_batches: await countOf('SELECT count(*) AS n FROM send_batches WHERE id LIKE ?1', like),
      audit_log: await countOf('SELECT count(*) AS n FROM audit_log WHERE target LIKE ?1', like),
    })
    const all = (n: number) => ({
      processed_marks: n,
      notifications: n,
      sent_messages: n,
      delivery_events: n,
      dead_letters: n,
      send_batches: n,
      audit_log: n,
    })
    expect(await left()).toEqual(all(25))
    const chunk = { RETENTION_CHUNK_ROWS: '10', RETENTION_MAX_CHUNKS: '1' }
    await runCron(new Date(), chunk)
    expect(await left()).toEqual(all(15))
    // The oldest went first.
    expect(
      await countOf('SELECT count(*) AS n FROM processed_marks WHERE idempotency_key = ?1', `chunk:${tag}-9`),
    ).toBe(0)
    expect(
      await countOf('SELECT count(*) AS n FROM processed_marks WHERE idempotency_key = ?1', `chunk:${tag}-10`),
    ).toBe(1)
    await runCron(new Date(), chunk)
    expect(await left()).toEqual(all(5))
    await runCron(new Date(), chunk)
    expect(await left()).toEqual(all(0))
    expect(
      await countOf(
        "SELECT count(*) AS n FROM dead_letters WHERE id LIKE ?1 AND status = 'open'",
        `chunk-open:${tag}-%`,
      ),
    ).toBe(3)
    // Decades past NOTIFICATION_RETENTION_DAYS as well: each row went in the run that removed its content.
    expect(await countOf('SELECT count(*) AS n FROM notifications WHERE id LIKE ?1', like)).toBe(0)
  })

  it('drains a backlog in one run: a chunk that comes back full is followed by another, up to RETENTION_MAX_CHUNKS', async () => {
    const tag = guid().slice(0, 8)
    const at = (index: number) => new Date(Date.UTC(1980, 0, 1) + index * 1000).toISOString()
    await env.DB.batch(
      Array.from({ length: 45 }, (_, index) =>
        env.DB.prepare(
          `INSERT INTO processed_marks (idempotency_key, event_id, contract, event_type, source, origin,
             source_message_id, outcome, received_at, processed_at)
           VALUES (?1, ?1, 'arthunt', 'response.created', 'http', 'test', ?1, 'enqueued', ?2, ?2)`,
        ).bind(`backlog:${tag}-${index}`, at(index)),
      ),
    )
    const left = () =>
      countOf('SELECT count(*) AS n FROM processed_marks WHERE idempotency_key LIKE ?1', `backlog:${tag}-%`)
    // Three chunks of ten a run in each D1 shard (the chunks are shared out: six for two shards): thirty go
    // in the first, the fifteen left in the second (a chunk of five ends it).
    const chunks = String(3 * shardDbs().length)
    await runCron(new Date(), { RETENTION_CHUNK_ROWS: '10', RETENTION_MAX_CHUNKS: chunks })
    expect(await left()).toBe(15)
    await runCron(new Date(), { RETENTION_CHUNK_ROWS: '10', RETENTION_MAX_CHUNKS: chunks })
    expect(await left()).toBe(0)
  })

  it("keeps a final notification's row as a stub until NOTIFICATION_RETENTION_DAYS, then deletes it; an unfinished one stays", async () => {
    const prefix = `rows:${guid().slice(0, 8)}`
    const now = Date.now()
    const created = new Date(now - 10 * DAY_MS).toISOString()
    await insertNotification(`${prefix}-sent`, 'sent', created)
    await insertNotification(`${prefix}-pending`, 'pending', created)
    // An erasure removed the pending one's content: it is a stub, but may still be sent, so it stays.
    await env.DB.prepare(
      "UPDATE notifications SET content_removed_at = ?2, content_removed_by = 'erasure' WHERE id = ?1",
    )
      .bind(`${prefix}-pending`, created)
      .run()
    // A delivery event of each: the sent one's leaves with its row, the pending one's stays with it.
    for (const id of [`${prefix}-sent`, `${prefix}-pending`]) {
      await env.DB.prepare(
        `INSERT INTO delivery_events (provider, provider_event_id, provider_message_id, notification_id, type, status,
           occurred_at, received_at, detail)
         VALUES ('resend', ?1, ?1, ?1, 'email.delivered', 'delivered', ?2, ?2, '{}')`,
      )
        .bind(id, created)
        .run()
    }
    // The exact message of the sent one, kept (SENT_MESSAGE_RETENTION_DAYS is a week in the tests): it goes with the row.
    await env.DB.prepare(
      `INSERT INTO sent_messages (notification_id, transport, message_id, raw, sent_at)
       VALUES (?1, 'resend', ?1, 'raw MIME', ?2)`,
    )
      .bind(`${prefix}-sent`, new Date(now).toISOString())
      .run()
    const events = async (id: string) =>
      countOf('SELECT count(*) AS n FROM delivery_events WHERE notification_id = ?1', id)
    const defaults = { NOTIFICATION_CONTENT_RETENTION_DAYS: '7', NOTIFICATION_RETENTION_DAYS: '14' }
    // Ten days old: past the content's seven, inside the row's fourteen.
    await runCron(new Date(now), defaults)
    expect(await notification(`${prefix}-sent`)).toMatchObject({ status: 'sent', content_removed_by: 'retention' })
    expect(await events(`${prefix}-sent`)).toBe(1)
    // Fifteen days old.
    await runCron(new Date(now + 5 * DAY_MS), defaults)
    expect(await notification(`${prefix}-sent`)).toBeNull()
    expect(await notification(`${prefix}-pending`)).toMatchObject({ status: 'pending', content_removed_by: 'erasure' })
    expect(await events(`${prefix}-sent`)).toBe(0)
    expect(await countOf('SELECT count(*) AS n FROM sent_messages WHERE notification_id = ?1', `${prefix}-sent`)).toBe(
      0,
    )
    expect(await events(`${prefix}-pending`)).toBe(1)
  })

  it('keeps a dead letter for its retention from when it was resolved, not from when it failed', async () => {
    const id = `resolved:${guid()}`
    await env.DB.prepare(
      `INSERT INTO dead_letters (id, queue, code, error, body, history, failure_id, first_seen, last_seen)
       VALUES (?1, 'notify-events', 'NTF_TEST_RESOLVED', 'test', '{}', '[]', ?1, '1991-01-01T00:00:00.000Z',
         '1991-01-01T00:00:00.000Z')`,
    )
      .bind(id)
      .run()
    const discarded = await fetchWorker(`/v1/dead-letters/${encodeURIComponent(id)}/discard`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'a test: discarded today' }),
    })
    expect(discarded.status).toBe(200)
    await runCron(new Date())
    expect(await countOf('SELECT count(*) AS n FROM dead_letters WHERE id = ?1', id)).toBe(1)
    await runCron(new Date(Date.now() + 31 * DAY_MS))
    expect(await countOf('SELECT count(*) AS n FROM dead_letters WHERE id = ?1', id)).toBe(0)
  })

  it('deletes audit rows past the audit retention (365 days) only; the trigger refuses any younger delete', async () => {
    const tag = guid()
    const ago = (days: number) => new Date(Date.now() - days * DAY_MS).toISOString()
    const insert = (days: number) =>
      env.DB.prepare(
        `INSERT INTO audit_log (at, actor, role, via, action, target, affected)
         VALUES (?1, 'admin token', 'admin', 'api', 'test.audit-retention', ?2, 1) RETURNING id`,
      )
        .bind(ago(days), `${tag}:${days}`)
        .first<{ id: number }>()
    await insert(400)
    const young = await insert(300)
    await runCron(new Date())
    const { results } = await env.DB.prepare('SELECT target FROM audit_log WHERE target LIKE ?1 ORDER BY id')
      .bind(`${tag}:%`)
      .all<{ target: string }>()
    expect(results.map((row) => row.target)).toEqual([`${tag}:300`])
    // Whoever asks, a row younger than a year stays, and no row is changed.
    await expect(env.DB.prepare('DELETE FROM audit_log WHERE id = ?1').bind(young?.id).run()).rejects.toThrow(
      /never deleted/,
    )
    await expect(
      env.DB.prepare("UPDATE audit_log SET at = '1990-01-01T00:00:00.000Z' WHERE id = ?1").bind(young?.id).run(),
    ).rejects.toThrow(/never changed/)
  })

  it('refuses to replay a failed send whose notification lost its content to retention', async () => {
    const id = `replay-${guid()}`
    await insertNotification(id, 'failed', '1995-01-01T00:00:00.000Z')
    // The row kept a century, its content the default week.
    await runCron(new Date(), { NOTIFICATION_RETENTION_DAYS: '36500' })
    expect((await notification(id)).content_removed_by).toBe('retention')
    const { answer } = await replayFailedSend(id)
    expect(answer.status).toBe(409)
    expect(((await answer.json()) as { error: { message: string } }).error.message).toMatch(/no longer has content/)
    expect((await notification(id)).status).toBe('failed')
  })

  it('refuses to replay a failed send whose notification retention deleted, instead of reporting it replayed', async () => {
    const id = `replay-gone-${guid()}`
    await insertNotification(id, 'failed', '1995-01-01T00:00:00.000Z')
    await runCron(new Date())
    expect(await notification(id)).toBeNull()
    const { answer, letter } = await replayFailedSend(id)
    expect(answer.status).toBe(409)
    expect(((await answer.json()) as { error: { message: string } }).error.message).toMatch(/no longer exists/)
    const left = await env.DB.prepare('SELECT status FROM dead_letters WHERE id = ?1').bind(letter).first()
    expect(left).toEqual({ status: 'open' })
  })

  it("counts a notification's retention from when it ended: one that ended late keeps its content and row for the whole retention", async () => {
    const id = `late-${guid()}`
    // Created decades ago, sent a minute ago (a backlog a paused transport held).
    await insertNotification(id, 'sent', '1995-01-01T00:00:00.000Z')
    await env.DB.prepare('UPDATE notifications SET updated_at = ?2, sent_at = ?2 WHERE id = ?1')
      .bind(id, new Date(Date.now() - 60_000).toISOString())
      .run()
    await runCron(new Date())
    expect(await notification(id)).toMatchObject({ status: 'sent', content_removed_at: null, subject: 'Subject' })
    // Eight days after it was sent: past the week of both.
    await runCron(new Date(Date.now() + 8 * DAY_MS))
    expect(await notification(id)).toBeNull()
  })
})

describe("D1's size", () => {
  it('is measured by the cron into the gauge notify_d1_size_bytes, served by /metrics and shown on the overview', async () => {
    await runCron(new Date())
    const gauge = await env.DB.prepare("SELECT value FROM gauges WHERE name = 'notify_d1_size_bytes'").first<{
      value: number
    }>()
    expect(gauge?.value).toBeGreaterThan(0)
    const metrics = await fetchWorker('/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    const text = await metrics.text()
    expect(text).toMatch(/^# TYPE notify_d1_size_bytes gauge$/m)
    expect(text).toMatch(new RegExp(`^notify_d1_size_bytes ${gauge?.value}$`, 'm'))
    const page = await consolePage()
    expect(page).toMatch(/Database: <strong>[\d.]+ MB<\/strong> of D1(&#39;|')s 10\.0 GB limit/)
  })
})
