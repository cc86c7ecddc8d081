import { InboundEventSchema, peekIdentity } from '../contracts/index.ts'
import { sha256Hex } from '../crypto.ts'
import { DispatchMessageSchema } from '../dispatch/message.ts'
import { onlyKindOf } from '../events/registry.ts'
import type { Logger } from '../log.ts'
import { QUEUES } from '../queue/names.ts'
import { DeadLetterEnvelopeSchema } from './envelope.ts'
import { type DeadLetterRow, upsertDeadLetter } from './store.ts'

/** Longest wait between attempts to store a dead letter while D1 is failing. */
const MAX_RETRY_DELAY_SECONDS = 3600

/**
 * Consumer of `notify-dlq`: stores every dead letter in D1 in one batch. Our
 * own dead letters arrive wrapped in a `DeadLetterEnvelope`; anything else was
 * moved here by Cloudflare after `max_retries` and is stored as
 * `NTF_RETRIES_EXHAUSTED`. When D1 fails the whole batch is retried with a
 * growing delay; nothing is acked before it is stored.
 */
export async function consumeDeadLetters(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const rows = await Promise.all(batch.messages.map((message) => toRow(message)))
  try {
    await env.DB.batch(rows.map((row) => upsertDeadLetter(env.DB, row)))
  } catch (error) {
    for (const message of batch.messages) {
      const delaySeconds = Math.min(MAX_RETRY_DELAY_SECONDS, 30 * 2 ** Math.min(message.attempts - 1, 10))
      message.retry({ delaySeconds })
    }
    log.error('dead-letter.store-failed', { count: rows.length, error })
    return
  }
  for (const message of batch.messages) message.ack()
  for (const row of rows) {
    log.warn('dead-letter.stored', {
      id: row.id,
      queue: row.queue,
      code: row.code,
      eventId: row.eventId,
      origin: row.origin,
    })
  }
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
