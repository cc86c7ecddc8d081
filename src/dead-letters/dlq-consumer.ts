import { utf8Length } from '@notify-edge/contracts'
import { configOf } from '../config.ts'
import { InboundEventSchema } from '../contracts/index.ts'
import { sha256Hex } from '../crypto.ts'
import { shardDbOfId } from '../d1/shards.ts'
import { persistEvents, type WriteResult } from '../d1/transactions.ts'
import { peekIdentity } from '../events/decode-inbound.ts'
import { onlyKindOf } from '../events/registry.ts'
import type { Logger } from '../log.ts'
import { COUNTERS, canonicalLabels, incrementCounter } from '../metrics/counters.ts'
import { DeadLetterEnvelopeSchema } from '../queue/dead-letter-envelope.ts'
import { DispatchMessageSchema } from '../queue/dispatch-message.ts'
import { QUEUES } from '../queue/names.ts'
import { deadLetterStoreDelay, describeError } from '../queue/policy.ts'
import { Settlements } from '../queue/settlements.ts'
import { type DeadLetterRow, type ReducedBody, upsertDeadLetter, upsertReducedDeadLetter } from './dead-letter-store.ts'
import { eraseIfErased, type NamedPeople, namedPeople } from './late-erasure.ts'

/**
 * `max_retries` of the notify-dlq consumer in wrangler.toml: the message's
 * delivery `max_retries + 1` is its last, since the queue has no dead-letter
 * queue of its own and Cloudflare drops what is retried after it.
 */
export const DLQ_MAX_RETRIES = 100

/**
 * Deliveries on which a dead letter's whole row is tried before it is stored
 * without its body. A row D1 refuses while it takes the others is refused for
 * what it holds (a value over a limit, a constraint, a trigger), which a retry
 * does not change; the first few retries are for a failure that only looked
 * like that. About eight minutes (30 s, 1, 2, 4 min).
 */
const WHOLE_ROW_ATTEMPTS = 5

type Unstored = {
  message: Message<unknown>
  row: DeadLetterRow
  people: NamedPeople
  db: D1Database
  cause: unknown
}

/**
 * Consumer of `notify-dlq`: stores every dead letter in D1. Our own dead
 * letters arrive wrapped in a `DeadLetterEnvelope`; anything else was moved
 * here by Cloudflare after `max_retries` and is stored as
 * `NTF_RETRIES_EXHAUSTED`. The batch is written in one D1 batch; when that
 * fails, each dead letter on its own (persistEvents), so one row D1 refuses
 * holds back none of the others. What is not stored is retried with a growing
 * delay (nothing is acked before it is stored); a row still refused after
 * `WHOLE_ROW_ATTEMPTS` is stored without its body (counted as `reduced`), and
 * one that cannot be stored even so is counted as `dropped` on its last
 * delivery — never lost without a trace.
 */
export async function consumeDeadLetters(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const stored = await Promise.all(batch.messages.map((message) => toRow(message)))
  const named = stored.map(notificationOf)
  const rows = await withEvents(env, stored, named, log)
  // A message on its way here when its recipient was erased would be stored with them in it: each row is
  // written with the check that leaves it as the erasure would have (late-erasure.ts).
  const { erasureKey } = configOf(env)
  const people = await Promise.all(rows.map((row) => namedPeople(row, erasureKey)))
  const now = new Date().toISOString()
  // A dead letter of notify-dispatch is kept in its notification's D1 shard, where the cron or a send's
  // mark writes the same dead letter (the same id) with its failed notification; every other in the primary.
  const dbOf = named.map((id) => (id === undefined ? env.DB : shardDbOfId(env, id)))
  const results = new Map<number, WriteResult>()
  for (const [db, indexes] of Map.groupBy(
    rows.map((_, index) => index),
    (index) => dbOf[index] as D1Database,
  )) {
    const written = await persistEvents(
      db,
      indexes.map((index) => {
        const row = rows[index] as DeadLetterRow
        return {
          item: index,
          statements: [upsertDeadLetter(db, row), eraseIfErased(db, row.id, people[index] as NamedPeople, now)],
        }
      }),
      [],
    )
    for (const [index, result] of written.results) results.set(index, result)
  }
  // No retry policy of its own: every retry names its delay (deadLetterStoreDelay), and nothing is
  // settled as a dead letter here (this is the dead-letter queue).
  const settlements = new Settlements([])
  const unstored: Unstored[] = []
  batch.messages.forEach((message, index) => {
    const row = rows[index] as DeadLetterRow
    const result = results.get(index)
    if (result?.committed) {
      settlements.ack(message)
      log.warn('dead-letter.stored', logFields(row))
    } else {
      unstored.push({
        message,
        row,
        people: people[index] as NamedPeople,
        db: dbOf[index] as D1Database,
        cause: result?.cause,
      })
    }
  })
  if (unstored.length > 0) {
    log.error('dead-letter.store-failed', { count: unstored.length, of: rows.length, error: unstored[0]?.cause })
    await Promise.all(unstored.map((entry) => settleUnstored(entry, settlements, log)))
  }
  await settlements.finish(batch, { dlq: env.DLQ, log })
}

/** The notification a dead letter of notify-dispatch names; undefined for any other. */
function notificationOf(row: DeadLetterRow): string | undefined {
  if (row.queue !== QUEUES.dispatch) return undefined
  const parsed = DispatchMessageSchema.safeParse(JSON.parse(row.body))
  return parsed.success ? parsed.data.notificationId : undefined
}

/** A dead letter D1 did not store: retried, stored reduced, or counted as dropped on its last delivery. */
async function settleUnstored(
  { message, row, people, db, cause }: Unstored,
  settlements: Settlements,
  log: Logger,
): Promise<void> {
  const failure = { code: 'NTF_DEPENDENCY_FAILED', error: describeError(cause) } as const
  const retry = () => settlements.retry(message, failure, deadLetterStoreDelay(message.attempts))
  if (message.attempts < WHOLE_ROW_ATTEMPTS) return retry()
  const reduced: ReducedBody = {
    notifyEdgeReduced: 1,
    cause: describeError(cause).slice(0, 500),
    bytes: utf8Length(row.body),
    sha256: await sha256Hex(row.body),
  }
  const labels = { queue: row.queue, code: row.code }
  try {
    await db.batch([
      upsertReducedDeadLetter(db, row, reduced),
      eraseIfErased(db, row.id, people, new Date().toISOString()),
      incrementCounter(db, COUNTERS.deadLettersUnstorable, canonicalLabels({ ...labels, outcome: 'reduced' }), 1),
    ])
    settlements.ack(message)
    log.error('dead-letter.stored-reduced', { ...logFields(row), cause: reduced.cause, bytes: reduced.bytes })
    return
  } catch (error) {
    // D1 refuses even the reduced row: an outage, or a rule on the fields that are left. Retried.
    if (message.attempts <= DLQ_MAX_RETRIES) return retry()
    await incrementCounter(db, COUNTERS.deadLettersUnstorable, canonicalLabels({ ...labels, outcome: 'dropped' }), 1)
      .run()
      .catch(() => undefined)
    log.error('dead-letter.dropped', { ...logFields(row), attempts: message.attempts, cause: reduced.cause, error })
    // Cloudflare drops it after this delivery; were max_retries raised, it would be tried again.
    retry()
  }
}

/**
 * A dead letter of notify-dispatch names a notification, not an event: it is
 * given the notification's event (and its source and kind), so that the
 * event's story shows it and the list finds it by the event id — one read
 * for the batch. A read that fails leaves them as they are (a dead letter is
 * never held back for it).
 */
async function withEvents(
  env: Env,
  rows: DeadLetterRow[],
  named: readonly (string | undefined)[],
  log: Logger,
): Promise<DeadLetterRow[]> {
  // Only those that name no event yet (`named`: each row's notification, `notificationOf`).
  const nameless = rows.map((row, index) => (row.eventId === null ? named[index] : undefined))
  const ids = [...new Set(nameless.flatMap((id) => id ?? []))]
  if (ids.length === 0) return rows
  try {
    // Each notification in its D1 shard (src/d1/shards.ts).
    const found = await Promise.all(
      [...Map.groupBy(ids, (id) => shardDbOfId(env, id))].map(async ([db, list]) => {
        const { results } = await db
          .prepare('SELECT id, event_id, source, kind FROM notifications WHERE id IN (SELECT value FROM json_each(?1))')
          .bind(JSON.stringify(list))
          .all<{ id: string; event_id: string; source: string; kind: string }>()
        return results
      }),
    )
    const byId = new Map(found.flat().map((row) => [row.id, row]))
    return rows.map((row, index) => {
      const notification = byId.get(nameless[index] ?? '')
      if (!notification) return row
      return {
        ...row,
        eventId: notification.event_id,
        source: notification.source,
        kind: row.kind ?? notification.kind,
      }
    })
  } catch (error) {
    log.warn('dead-letter.event-not-found', { code: 'NTF_DEPENDENCY_FAILED', count: ids.length, error })
    return rows
  }
}

/** What a log line says of a dead letter: where it came from, never its body. */
function logFields(row: DeadLetterRow) {
  return { id: row.id, queue: row.queue, code: row.code, eventId: row.eventId, origin: row.origin }
}

async function toRow(message: Message<unknown>): Promise<DeadLetterRow> {
  const envelope = DeadLetterEnvelopeSchema.safeParse(message.body)
  if (envelope.success) {
    const { queue, code, error, attempts, failureId, failedAt, kind } = envelope.data
    const identity = await identify(queue, envelope.data.message)
    return { ...identity, code, error, attempts, failureId, failedAt, kind: kind ?? identity.kind }
  }
  return {
    ...(await identify(queueByShape(message.body), message.body)),
    code: 'NTF_RETRIES_EXHAUSTED',
    error: 'moved to notify-dlq by Cloudflare after max_retries: the consumer never settled it',
    attempts: null,
    failureId: `cloudflare:${message.id}`,
    failedAt: new Date(message.timestamp).toISOString(),
  }
}

/** The queue a message that Cloudflare moved came from, judged by its shape. */
function queueByShape(body: unknown): string {
  if (InboundEventSchema.safeParse(body).success) return QUEUES.events
  if (DispatchMessageSchema.safeParse(body).success) return QUEUES.dispatch
  const object = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
  if ('notifyEdgeResendEvent' in object || String(object.type).startsWith('cf.email.sending.')) {
    return QUEUES.emailEvents
  }
  return 'unknown'
}

type Identity = Pick<
  DeadLetterRow,
  'id' | 'queue' | 'source' | 'origin' | 'sourceMessageId' | 'eventId' | 'eventType' | 'body' | 'kind'
>

/**
 * Where a dead message came from and its stable row id: sha256 of the queue and
 * the message's identity (source, source message id and payload for an inbound
 * event, whose `receivedAt` changes on every re-read; the whole body otherwise).
 */
async function identify(queue: string, body: unknown): Promise<Identity> {
  const json = JSON.stringify(body) ?? 'null'
  const inbound = InboundEventSchema.safeParse(body)
  if (!inbound.success) {
    return {
      id: await sha256Hex(`${queue}\n${json}`),
      queue,
      source: null,
      origin: null,
      sourceMessageId: null,
      eventId: null,
      eventType: null,
      kind: null,
      body: json,
    }
  }
  const event = inbound.data
  const identity = peekIdentity(event)
  return {
    id: await sha256Hex(
      `${queue}\n${event.source}\n${event.sourceMessageId}\n${event.encoding ?? 'utf8'}\n${event.body}`,
    ),
    queue,
    source: event.source,
    origin: event.origin,
    sourceMessageId: event.sourceMessageId,
    // Without a readable event id, the source's message id is what the operator has to search by.
    eventId: identity.eventId ?? event.sourceMessageId,
    eventType: identity.eventType ?? null,
    // The kind an event type makes, where it makes only one (a decision's depends on its payload).
    kind: onlyKindOf(identity.eventType ?? '') ?? null,
    body: json,
  }
}
