import { configOf } from '../config.ts'
import { PipelineError } from '../errors.ts'
import type { Logger } from '../log.ts'
import { applyDeliveryStatus } from '../notifications/delivery.ts'
import { type EventWrite, persistEvents } from '../queue/persist.ts'
import { type Settlement, settleFailure } from '../queue/policy.ts'
import { settleBatch } from '../queue/settle.ts'
import { suppressAutomatically } from '../suppression/store.ts'
import { decodeDeliveryEvent } from './decode.ts'
import type { DeliveryEvent } from './model.ts'
import { bare, insertDeliveryEvent, notificationsByProviderId } from './store.ts'

type Decoded = { message: Message<unknown>; event: DeliveryEvent }

/**
 * Consumer of `notify-email-events`: what providers report about sent mail.
 * Each event is decoded into the common model (a shape it does not know is a
 * dead letter naming the field), matched to the notification sent under its
 * message id (one D1 read for the batch), then recorded once with its effects
 * in one D1 batch: the timeline row, the notification's delivery status, and
 * the suppression a hard bounce, a complaint or a provider refusal asks for.
 * An event about a message this Worker did not send still suppresses its
 * address. Never throws.
 */
export async function consumeEmailEvents(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const config = configOf(env)
  const settlements = new Map<Message<unknown>, Settlement>()
  const decoded: Decoded[] = []
  for (const message of batch.messages) {
    const result = decodeDeliveryEvent(message.body)
    if ('error' in result) {
      settlements.set(message, { action: 'dead-letter', code: 'NTF_INVALID_PAYLOAD', error: result.error })
      log.warn('delivery.invalid', { messageId: message.id, code: 'NTF_INVALID_PAYLOAD' })
    } else decoded.push({ message, event: result.event })
  }
  if (decoded.length > 0) await record(decoded, env, log, settlements, config.RETRY_DELAYS_SECONDS)
  await settleBatch(batch, settlements, { dlq: env.DLQ, log, fallbackDelaySeconds: 30 })
}

async function record(
  decoded: readonly Decoded[],
  env: Env,
  log: Logger,
  settlements: Map<Message<unknown>, Settlement>,
  delays: readonly number[],
): Promise<void> {
  const now = new Date()
  let matched: Map<string, string>
  try {
    matched = await notificationsByProviderId(
      env.DB,
      decoded.map(({ event }) => event.providerMessageId),
    )
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 read: ${(cause as Error).message}`, { cause })
    for (const { message } of decoded) settlements.set(message, settleFailure(error, message.attempts, delays))
    return
  }
  const writes: EventWrite<Decoded>[] = decoded.map((item) => ({
    item,
    statements: statementsOf(env, item.event, matched.get(bare(item.event.providerMessageId)) ?? null, now),
  }))
  const { results } = await persistEvents(env.DB, writes, [])
  for (const { item } of writes) {
    const result = results.get(item)
    const { message, event } = item
    if (result?.committed) {
      settlements.set(message, { action: 'ack' })
      const notificationId = matched.get(bare(event.providerMessageId)) ?? null
      log.info(result.won ? 'delivery.recorded' : 'delivery.duplicate', {
        provider: event.provider,
        type: event.type,
        status: event.status,
        notificationId,
        suppressed: event.suppression?.cause ?? null,
      })
    } else {
      const cause = result?.cause
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 write: ${(cause as Error)?.message}`, { cause })
      settlements.set(message, settleFailure(error, message.attempts, delays))
    }
  }
}

/** The timeline row first (its change says whether this is the first delivery), then the effects. */
function statementsOf(env: Env, event: DeliveryEvent, notificationId: string | null, now: Date): D1PreparedStatement[] {
  const at = now.toISOString()
  const statements = [insertDeliveryEvent(env.DB, event, notificationId, at)]
  if (notificationId && event.status !== 'accepted') {
    statements.push(applyDeliveryStatus(env.DB, notificationId, event, at))
  }
  const request = event.suppression
  if (request && event.recipient) {
    const config = configOf(env)
    const until =
      request.until === 'never'
        ? null
        : new Date(
            now.getTime() +
              (request.until === 'soft'
                ? config.SUPPRESSION_SOFT_BOUNCE_HOURS * 3_600_000
                : config.SUPPRESSION_PROVIDER_DAYS * 86_400_000),
          ).toISOString()
    statements.push(
      suppressAutomatically(
        env.DB,
        {
          address: event.recipient,
          cause: request.cause,
          reason: request.reason,
          until,
          source: event.provider,
          notificationId,
          providerEvent: `${event.provider}:${event.providerEventId}`,
        },
        at,
        { provider: event.provider, eventId: event.providerEventId },
      ),
    )
  }
  return statements
}
