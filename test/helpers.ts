import { createExecutionContext, createMessageBatch, getQueueResult } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { vi } from 'vitest'
import type { InboundEvent } from '../src/contracts/index.ts'
import { bucketOf } from '../src/d1/shards.ts'
import worker from '../src/index.ts'
import { allRows, dbOfUser, shardDbs } from './shards.ts'
import { fetchWorker } from './worker-fetch.ts'

export const INGEST_TOKEN = 'test-ingest-token-0123456789'
export const ADMIN_TOKEN = 'test-admin-token-0123456789'

/** A sample of examples/: ArtHunt samples are bodies; PIN samples are Kafka records. */
export type Example = {
  name: string
  contract: 'arthunt' | 'pin'
  /** The payload as a JSON value. */
  value: Record<string, unknown>
  headers: Record<string, string>
}

const arthunt = import.meta.glob<Record<string, unknown>>('../examples/arthunt/*.json', {
  eager: true,
  import: 'default',
})
const pin = import.meta.glob<{ headers: Record<string, string>; value: Record<string, unknown> }>(
  '../examples/pin/*.json',
  { eager: true, import: 'default' },
)

/** Every sample in examples/ (deep copies: tests may mutate them). */
export function examples(): Example[] {
  const name = (path: string) => path.replace(/^.*\//, '').replace(/\.json$/, '')
  return [
    ...Object.entries(arthunt).map(
      ([path, value]): Example => ({
        name: name(path),
        contract: 'arthunt',
        value: structuredClone(value),
        headers: {},
      }),
    ),
    ...Object.entries(pin).map(
      ([path, record]): Example => ({
        name: name(path),
        contract: 'pin',
        value: structuredClone(record.value),
        headers: { ...record.headers },
      }),
    ),
  ]
}

/** One sample by file name, e.g. `response.created` or `verification-completed`. */
export function example(name: string): Example {
  const found = examples().find((candidate) => candidate.name === name)
  if (!found) throw new Error(`no example ${name}`)
  return found
}

let counter = 0

/** A fresh random GUID (v4). */
export function guid(): string {
  return crypto.randomUUID()
}

/** Wraps a payload as the bridge would: an InboundEvent with a unique sourceMessageId. */
export function inbound(
  value: unknown,
  headers: Record<string, string> = {},
  overrides: Partial<InboundEvent> = {},
): InboundEvent {
  counter += 1
  return {
    source: 'http',
    origin: `test:${counter}`,
    sourceMessageId: `test-${guid()}`,
    receivedAt: new Date().toISOString(),
    headers,
    body: JSON.stringify(value),
    ...overrides,
  }
}

/**
 * A sample as an InboundEvent, with fresh ids so each test's event is its own
 * — a response's project owner too: responses to one owner share a digest and
 * a throttle window, so a test that means one owner says so in `mutate`.
 */
export function freshInbound(name: string, mutate?: (value: Record<string, unknown>) => void): InboundEvent {
  const sample = example(name)
  const id = guid()
  if (sample.contract === 'arthunt') (sample.value.envelope as Record<string, unknown>).eventId = id
  else sample.headers['message-id'] = id
  if (name === 'response.created') {
    const data = sample.value.data as { recipient: { userId: string } }
    data.recipient.userId = guid()
  }
  mutate?.(sample.value)
  return inbound(sample.value, sample.headers)
}

/** `POST /v1/ingest` through the Worker's own fetch handler. */
export function postIngest(body: unknown, token: string | null = INGEST_TOKEN): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (token !== null) headers.authorization = `Bearer ${token}`
  return fetchWorker('/v1/ingest', {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
}

/** Puts a contact into the replica, as a contact-upserted event would. */
export async function seedContact(
  userId: string,
  contact: {
    email?: string
    locale?: string | null
    timeZone?: string | null
    displayName?: string | null
    version?: number
  } = {},
): Promise<void> {
  await (await dbOfUser(userId))
    .prepare(
      `INSERT INTO contacts (user_id, email, locale, time_zone, display_name, version, updated_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
     ON CONFLICT (user_id) DO UPDATE SET email = excluded.email, locale = excluded.locale, time_zone = excluded.time_zone,
       display_name = excluded.display_name, version = excluded.version`,
    )
    .bind(
      userId,
      contact.email ?? `user-${userId.slice(0, 8)}@example.com`,
      contact.locale === undefined ? 'ru-RU' : contact.locale,
      contact.timeZone === undefined ? 'Europe/Moscow' : contact.timeZone,
      contact.displayName === undefined ? 'Тест Пользователь' : contact.displayName,
      contact.version ?? 1,
      new Date().toISOString(),
    )
    .run()
}

/** A notification row as tests read it. */
export type NotificationRecord = {
  id: string
  kind: string
  channel: string
  status: string
  urgency: string
  recipient_user_id: string
  recipient_email: string | null
  locale: string | null
  subject: string | null
  text_body: string | null
  html_body: string | null
  status_reason: string | null
  error_code: string | null
  scheduled_at: string
  is_fallback: number
}

/** The notifications of an event (by its eventId / message-id). */
export async function notificationsOf(eventId: string): Promise<NotificationRecord[]> {
  const rows = await allRows<NotificationRecord>('SELECT * FROM notifications WHERE event_id = ?1', eventId)
  return rows.sort((a, b) =>
    a.recipient_user_id < b.recipient_user_id ? -1 : a.recipient_user_id > b.recipient_user_id ? 1 : 0,
  )
}

/**
 * A real D1 failure confined to some rows: a trigger that aborts every insert
 * into `table` matching `condition` (SQL over NEW) with `error`. Returns the repair.
 */
export async function refuseInserts(table: string, condition: string, error: string): Promise<() => Promise<void>> {
  const name = `refuse_${guid().replaceAll('-', '_')}`
  // In every D1 shard: the row may be written in any of them.
  for (const db of shardDbs()) {
    await db
      .prepare(
        `CREATE TRIGGER ${name} BEFORE INSERT ON ${table} WHEN ${condition}
         BEGIN SELECT RAISE(ABORT, '${error}'); END`,
      )
      .run()
  }
  return async () => {
    for (const db of shardDbs()) await db.prepare(`DROP TRIGGER ${name}`).run()
  }
}

/** Waits until `check` passes (the pipeline runs on real local queues). */
export function eventually<T>(check: () => Promise<T>, timeout = 30_000): Promise<T> {
  return vi.waitFor(check, { timeout, interval: 100 })
}

/** Raw MIME messages handed to the transport for an event's notifications. */
export async function sentMessagesOf(eventId: string): Promise<{ notification_id: string; raw: string }[]> {
  return allRows<{ notification_id: string; raw: string }>(
    `SELECT s.notification_id, s.raw FROM sent_messages s JOIN notifications n ON n.id = s.notification_id
     WHERE n.event_id = ?1`,
    eventId,
  )
}

/** A parsed raw MIME message: decoded headers and text/html parts. */
export type ParsedMail = { headers: Record<string, string>; text: string; html: string }

/**
 * A header value as a reader sees it: unfolded (RFC 5322 §2.2.3), the white
 * space between two encoded-words dropped (RFC 2047 §6.2), each word decoded.
 */
function decodeWords(value: string): string {
  return value
    .replace(/\r?\n(?=[ \t])/g, '')
    .replace(/(\?=)[ \t]+(?==\?)/g, '$1')
    .replace(/=\?utf-8\?B\?([^?]*)\?=/gi, (_, b64: string) =>
      new TextDecoder().decode(Uint8Array.from(atob(b64), (char) => char.charCodeAt(0))),
    )
}

/** Parses what mimetext builds (multipart/alternative, base64 parts); enough to assert on. */
export function parseMime(raw: string): ParsedMail {
  const [head = '', ...rest] = raw.split(/\r?\n\r?\n/)
  const headers: Record<string, string> = {}
  for (const line of head.split(/\r?\n(?![ \t])/)) {
    const colon = line.indexOf(':')
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = decodeWords(line.slice(colon + 1).trim())
  }
  const body = rest.join('\n\n')
  const boundary = /boundary="?([^";\s]+)"?/.exec(headers['content-type'] ?? '')?.[1]
  const parts = boundary ? body.split(`--${boundary}`) : [body]
  const part = (type: string) => {
    const found = parts.find((candidate) => candidate.toLowerCase().includes(`content-type: ${type}`))
    if (!found) return ''
    const content = found
      .split(/\r?\n\r?\n/)
      .slice(1)
      .join('\n\n')
      .replace(/\s+/g, '')
    return new TextDecoder().decode(Uint8Array.from(atob(content), (char) => char.charCodeAt(0)))
  }
  return { headers, text: part('text/plain'), html: part('text/html') }
}

/**
 * Delivers messages to a consumer of this Worker directly, as Cloudflare would
 * (`attempts` = delivery count). The test batch does not record retry options,
 * so `retry()` is observed (and still called through) to read each delay.
 */
export async function deliverBatch(
  messages: { id: string; attempts: number; body: unknown }[],
  queue = 'notify-events',
  overrides: Record<string, unknown> = {},
) {
  const batch = createMessageBatch(
    queue,
    messages.map((message) => ({ ...message, timestamp: new Date() })),
  )
  const settled = watchQueue(batch)
  const ctx = createExecutionContext()
  await worker.queue(batch, { ...env, ...overrides } as Env)
  return settled(ctx)
}

/**
 * Watches how a consumer settles `batch`, to be read once it ran: each
 * message's end (`explicitAcks`, `retryMessages` with each delay), whether
 * the consumer said it one by one or for the whole batch with `ackAll()` or
 * `retryAll()` (src/queue/settlements.ts) — a test asserts which messages end
 * how, not which call said it. Call before the consumer runs.
 */
export function watchQueue(batch: MessageBatch) {
  const whole = vi.spyOn(batch, 'retryAll')
  const each = batch.messages.map((message) => vi.spyOn(message, 'retry'))
  return async (ctx: ExecutionContext) => {
    const result = await getQueueResult(batch, ctx)
    const ids = batch.messages.map((message) => message.id)
    const retryMessages = result.retryBatch.retry
      ? ids.map((msgId) => ({ msgId, delaySeconds: whole.mock.calls[0]?.[0]?.delaySeconds }))
      : batch.messages.flatMap((message, index) =>
          (each[index]?.mock.calls ?? []).map(([options]) => ({
            msgId: message.id,
            delaySeconds: options?.delaySeconds,
          })),
        )
    return { ...result, explicitAcks: result.ackAll ? ids : result.explicitAcks, retryMessages }
  }
}

/** Delivers one message, as Cloudflare would on its `attempts`-th delivery. */
export function deliver(body: unknown, attempts: number, id = `msg-${guid()}`, queue = 'notify-events') {
  return deliverBatch([{ id, attempts, body }], queue)
}

/**
 * Stores `count` dead letters of `code` through the dead-letter consumer, as
 * if notify-events had given up on fresh response.created events.
 */
export async function storeDeadLetters(count: number, code: string): Promise<void> {
  const bodies = Array.from({ length: count }, () => ({
    notifyEdgeDeadLetter: 1,
    queue: 'notify-events',
    code,
    error: 'test',
    attempts: 3,
    failureId: guid(),
    failedAt: new Date().toISOString(),
    message: freshInbound('response.created'),
  }))
  for (let start = 0; start < bodies.length; start += 100) {
    const batch = createMessageBatch(
      'notify-dlq',
      bodies
        .slice(start, start + 100)
        .map((body, index) => ({ id: `p${start + index}`, timestamp: new Date(), attempts: 1, body })),
    )
    createExecutionContext()
    await worker.queue(batch, env)
  }
}

/** What one dispatch delivery did: its acks and retries, and the messages it put on notify-dispatch. */
export type DispatchOutcome = Awaited<ReturnType<ReturnType<typeof watchQueue>>> & {
  /** Delays of `message.retry()` calls (the queue's own retry: dependency failures). */
  delays: (number | undefined)[]
  /** Messages this delivery sent to notify-dispatch (a retry's next try, a not-yet-due notification). */
  enqueued: { body: { notificationId: string; due?: string }; delaySeconds: number | undefined }[]
}

/**
 * Delivers one notify-dispatch message with an env of our choosing (the
 * transport is configuration). The real DISPATCH queue still receives what the
 * consumer sends; the test also sees it.
 */
export async function dispatchOnce(
  body: { notificationId: string; due?: string },
  overrides: Record<string, unknown> = {},
  attempts = 1,
): Promise<DispatchOutcome> {
  return dispatchBatch([body], overrides, attempts)
}

/**
 * Delivers these notify-dispatch messages as one batch (one consumer invocation), as `dispatchOnce` does one.
 * With `forward` false, what the consumer sends to notify-dispatch is only recorded: this runtime's own
 * consumer, with the test env's transport, does not race the test for it.
 */
export async function dispatchBatch(
  bodies: { notificationId: string; due?: string }[],
  overrides: Record<string, unknown> = {},
  attempts = 1,
  forward = true,
): Promise<DispatchOutcome> {
  const batch = createMessageBatch(
    'notify-dispatch',
    bodies.map((body) => ({ id: `d-${guid()}`, timestamp: new Date(), attempts, body })),
  )
  const enqueued: DispatchOutcome['enqueued'] = []
  const real = env.DISPATCH
  const recording = {
    send: (message: unknown, options?: QueueSendOptions) => real.send(message, options),
    sendBatch: async (messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions) => {
      const all = [...messages]
      for (const message of all) {
        enqueued.push({
          body: message.body as DispatchOutcome['enqueued'][number]['body'],
          delaySeconds: message.delaySeconds,
        })
      }
      if (forward) return real.sendBatch(all, options)
    },
  }
  const settled = watchQueue(batch)
  const ctx = createExecutionContext()
  await worker.queue(batch, { ...env, ...overrides, DISPATCH: recording } as unknown as Env)
  const result = await settled(ctx)
  const delays = result.retryMessages.map((retry) => retry.delaySeconds)
  return { ...result, delays, enqueued }
}

/** A pending notification due now, as materialize would have written it. */
export async function pendingNotification(
  email: string,
  overrides: {
    scheduledAt?: string
    enqueuedAt?: string
    userId?: string
    /** An in-app notification: its title, body and HTML body (its link and action as JSON) instead of the email's. */
    inApp?: { title: string; body: string; extras: string }
  } = {},
): Promise<string> {
  const userId = overrides.userId ?? guid()
  // Without a user of its own, an id without a bucket, in the primary (as rows made before D1 shards).
  const id = overrides.userId
    ? `ntf_b${await bucketOf(userId)}_${guid().replaceAll('-', '')}`
    : `ntf_test_${guid().replaceAll('-', '')}`
  const now = new Date().toISOString()
  await (overrides.userId ? await dbOfUser(userId) : env.DB)
    .prepare(
      `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency,
       recipient_user_id, recipient_email, recipient_name, locale, time_zone, subject, text_body, html_body,
       template_version, status, scheduled_at, enqueued_at, created_at, updated_at)
     VALUES (?1, ?2, ?3, 'http', 'InvitationCreated', ?9, 'normal', ?4, ?5, 'Михаил Дизайнер', 'ru',
       'Europe/Moscow', ?10, ?11, ?12, 1, 'pending', ?6, ?7, ?8, ?8)`,
    )
    .bind(
      id,
      `test:${id}`,
      guid(),
      userId,
      email,
      overrides.scheduledAt ?? now,
      overrides.enqueuedAt ?? now,
      now,
      overrides.inApp ? 'in-app' : 'email',
      overrides.inApp?.title ?? 'Вас пригласили в проект',
      overrides.inApp?.body ?? 'Текст',
      overrides.inApp?.extras ?? '<p>Текст</p>',
    )
    .run()
  return id
}

/** Runs the cron trigger as of `at`, with an env of our choosing. */
export async function runCron(at: Date, overrides: Record<string, unknown> = {}): Promise<void> {
  const { createScheduledController, waitOnExecutionContext } = await import('cloudflare:test')
  const ctx = createExecutionContext()
  await worker.scheduled(createScheduledController({ scheduledTime: at, cron: '* * * * *' }), {
    ...env,
    ...overrides,
  } as Env)
  await waitOnExecutionContext(ctx)
}

/** A console page as the admin sees it: signs in with the token form, then GETs `path`. */
export async function consolePage(path = '/console', form?: Record<string, string>): Promise<string> {
  return (await consoleAnswer(path, form)).html
}

/**
 * The console's page at `path` for a signed-in admin (signed in with the
 * token form), or with `form` the answer of its form (posted with the page's
 * CSRF token to `action`, by default its editor's Preview), with its status.
 */
export async function consoleAnswer(
  path: string,
  form?: Record<string, string>,
  action = `${path}/preview`,
): Promise<{ status: number; html: string }> {
  const call = (target: string, init: RequestInit = {}) =>
    worker.fetch(new Request(`http://worker${target}`, { redirect: 'manual', ...init }), env, createExecutionContext())
  const signedIn = await call('/console/sign-in', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
    body: new URLSearchParams({ token: ADMIN_TOKEN }).toString(),
  })
  const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
  const page = await call(path, { headers: { cookie } })
  const html = await page.text()
  if (!form) return { status: page.status, html }
  const csrf = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? ''
  const posted = await call(action, {
    method: 'POST',
    headers: { cookie, origin: 'http://worker', 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: csrf, ...form }).toString(),
  })
  return { status: posted.status, html: await posted.text() }
}

/** An operator API call with the admin token (answers checked against /openapi.json): the status and the parsed body (its text when it is not JSON). */
export async function adminCall<T = Record<string, unknown>>(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const response = await fetchWorker(path, {
    method,
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await response.text()
  // A 204 has no body, and a refusal of the platform's may not be JSON: the text as it came, then.
  return {
    status: response.status,
    body: (text && response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text) as T,
  }
}

/** Turns a kind's in-app channel on or off in every shard's stored policies, as an operator would. */
export async function inAppFor(kind: string, enabled: boolean): Promise<void> {
  for (const db of shardDbs()) {
    await db
      .prepare("UPDATE channel_policies SET enabled = ?2 WHERE kind = ?1 AND channel = 'in-app'")
      .bind(kind, enabled ? 1 : 0)
      .run()
  }
}

/**
 * Quiet hours from an hour ago to two hours ahead in Moscow (the zone of a
 * recipient without a contact), holding normal urgency too: what an env
 * override needs for a notification to be written held until they end.
 */
export function quietAroundNow(): Record<string, string> {
  const clock = (shiftMinutes: number) =>
    new Intl.DateTimeFormat('en-GB', {
      timeZone: 'Europe/Moscow',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    }).format(new Date(Date.now() + shiftMinutes * 60_000))
  return { QUIET_HOURS_URGENCIES: 'low,normal', QUIET_HOURS_START: clock(-60), QUIET_HOURS_END: clock(120) }
}
