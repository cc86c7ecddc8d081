import { configOf } from '../config.ts'
import { shardEnvs, shardOfId } from '../d1/shards.ts'
import { type EventWrite, persistEvents } from '../d1/transactions.ts'
import { pseudonymOf } from '../erasure/pseudonym.ts'
import { PipelineError } from '../errors.ts'
import type { Logger } from '../log.ts'
import { notificationIdOfMessageId } from '../mail/mime.ts'
import { applyDeliveryStatus, discardSettled, settleUnknownOutcome } from '../notifications/delivery.ts'
import { Settlements } from '../queue/settlements.ts'
import { suppressAutomatically } from '../suppression/suppression-store.ts'
import { decodeDeliveryEvent } from './decode-provider-event.ts'
import { aboutOf, type EventMatches, insertDeliveryEvent, notificationsOfEvents } from './delivery-event-store.ts'
import type { DeliveryEvent } from './model.ts'

/** A decoded event, with its recipient's pseudonym (for an erased address: src/erasure/pseudonym.ts). */
type Decoded = { message: Message<unknown>; event: DeliveryEvent; pseudonym: string | null }

/**
 * How long an event that names no notification yet waits for the `sent` mark
 * (which follows the provider's answer by about one D1 write): two retries,
 * then it is recorded without a notification (a message this Worker did not
 * send, or one whose row is gone).
 */
const LINK_WAIT_SECONDS = [2, 10]

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
  const settlements = new Settlements(config.RETRY_DELAYS_SECONDS)
  const decoded: Decoded[] = []
  for (const message of batch.messages) {
    const result = decodeDeliveryEvent(message.body)
    if ('error' in result) {
      const failure = { code: 'NTF_INVALID_PAYLOAD', error: result.error } as const
      settlements.failWith(message, failure)
      log.warn('delivery.invalid', { messageId: message.id, code: 'NTF_INVALID_PAYLOAD' })
    } else {
      const { recipient } = result.event
      const pseudonym = recipient ? await pseudonymOf(recipient, config.erasureKey) : null
      decoded.push({ message, event: result.event, pseudonym })
    }
  }
  const count = config.DB_SHARDS
  if (decoded.length > 0 && count === 1) await record(decoded, env, log, settlements)
  else if (decoded.length > 0) await recordSharded(decoded, env, count, log, settlements)
  await settlements.finish(batch, { dlq: env.DLQ, log })
}

/**
 * With D1 shards, each event is recorded in the shard of its notification:
 * the one its id names (our header, which Resend's events carry back), else
 * the one whose notification has its provider id (one read per shard for the
 * batch). An event no shard knows is recorded in the shard of the
 * notification its Message-ID names (ours: `<{notificationId}@…>`), else in
 * the primary. The
 * suppression a bounce or a complaint asks for is about an address, which
 * recipients in any shard may share: it is written in every other shard
 * first, and the event retried if that fails.
 */
async function recordSharded(
  decoded: readonly Decoded[],
  env: Env,
  count: number,
  log: Logger,
  settlements: Settlements,
): Promise<void> {
  const envs = shardEnvs(env, count)
  const unnamed = decoded.filter(({ event }) => event.notificationId === null)
  // By event: the shard and the id of the notification it was sent for.
  const found = new Map<Decoded, { shard: number; id: string }>()
  if (unnamed.length > 0) {
    try {
      const keys = unnamed.map(({ event }) => ({ ...event, notificationId: null }))
      const matched = await Promise.all(envs.map((shard) => notificationsOfEvents(shard.DB, keys)))
      matched.forEach((matches, shard) => {
        for (const item of unnamed) {
          const { id } = aboutOf(matches, { ...item.event, notificationId: null })
          if (id !== null) found.set(item, { shard, id })
        }
      })
    } catch (cause) {
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 read: ${(cause as Error).message}`, { cause })
      for (const { message } of decoded) settlements.fail(message, error)
      return
    }
  }
  // An event no shard knows (yet) is recorded in the shard of the notification its Message-ID names: a send
  // whose mark was never written turns unknown there, and the cron settles it by the events of its own shard.
  // Recorded in the primary, such an event was not found, and the email was sent a second time.
  // Anything else goes to the primary.
  const homeOf = (item: Decoded) => {
    if (item.event.notificationId !== null) return shardOfId(item.event.notificationId, count)
    const known = found.get(item)
    if (known !== undefined) return known.shard
    const named = notificationIdOfMessageId(item.event.providerMessageId)
    return named === null ? 0 : shardOfId(named, count)
  }
  // What an event asks of the suppression list is written in every shard but its own first: a
  // recipient at the same address may be in any (one who complained must not be emailed from
  // another shard, nor a bounced address tried again there). Unguarded, as a link that never comes
  // is: a redelivery may write it again after an operator removed it there (the safe side). Each copy
  // names the notification the event is about, as its own shard's does. If a shard's write fails, the
  // event is retried, and its own shard records it then.
  const asking = decoded.filter(({ event }) => event.suppression && event.recipient)
  const about = (item: Decoded) => item.event.notificationId ?? found.get(item)?.id ?? null
  const now = new Date()
  const failed = new Set<Decoded>()
  for (const [shard, shardEnv] of envs.entries()) {
    const here = asking.filter((item) => !failed.has(item) && homeOf(item) !== shard)
    if (here.length === 0) continue
    try {
      await shardEnv.DB.batch(here.flatMap((item) => suppressionOf(shardEnv, item, about(item), now, false)))
    } catch (cause) {
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 write: ${(cause as Error).message}`, { cause })
      for (const item of here) {
        settlements.fail(item.message, error)
        failed.add(item)
      }
    }
  }
  const parts = Map.groupBy(
    decoded.filter((item) => !failed.has(item)),
    homeOf,
  )
  await Promise.all([...parts].map(([shard, part]) => record(part, envs[shard] as Env, log, settlements)))
}

async function record(decoded: readonly Decoded[], env: Env, log: Logger, settlements: Settlements): Promise<void> {
  const now = new Date()
  let matched: EventMatches
  try {
    matched = await notificationsOfEvents(
      env.DB,
      decoded.map(({ event }) => event),
    )
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 read: ${(cause as Error).message}`, { cause })
    for (const { message } of decoded) settlements.fail(message, error)
    return
  }
  // An event may beat the `sent` mark of its notification by a moment: it waits for it (a retry or
  // two) before it is recorded without one. What it asks of the suppression list is not held back.
  const writes: EventWrite<Decoded>[] = []
  const waiting: EventWrite<Decoded>[] = []
  const notificationOf = ({ event }: Decoded) => aboutOf(matched, event).id
  for (const item of decoded) {
    // About a notification another provider sent: one that failed over after this one may have taken it.
    const { elsewhere } = aboutOf(matched, item.event)
    if (elsewhere !== null && item.message.attempts === 1) {
      log.warn('delivery.other-provider', {
        provider: item.event.provider,
        type: item.event.type,
        notificationId: elsewhere,
      })
    }
    const notificationId = notificationOf(item)
    if (notificationId === null && LINK_WAIT_SECONDS[item.message.attempts - 1] !== undefined) {
      waiting.push({ item, statements: suppressionOf(env, item, null, now, false) })
    } else writes.push({ item, statements: statementsOf(env, item, notificationId, now) })
  }
  await holdForLink(env, waiting, settlements, log)
  const { results } = await persistEvents(env.DB, writes, [])
  for (const { item } of writes) {
    const result = results.get(item)
    const { message, event } = item
    if (result?.committed) {
      settlements.ack(message)
      const notificationId = notificationOf(item)
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
      settlements.fail(message, error)
    }
  }
}

/** The timeline row first (its change says whether this is the first delivery), then the effects. */
function statementsOf(env: Env, item: Decoded, notificationId: string | null, now: Date): D1PreparedStatement[] {
  const { event } = item
  const at = now.toISOString()
  const statements = [insertDeliveryEvent(env.DB, event, notificationId, at, item.pseudonym)]
  if (notificationId) {
    statements.push(
      settleUnknownOutcome(env.DB, notificationId, event.occurredAt, at, event.providerMessageId, event.provider),
      discardSettled(env.DB, notificationId, at),
    )
  }
  if (notificationId && event.status !== 'accepted') {
    statements.push(applyDeliveryStatus(env.DB, notificationId, event.status, event.occurredAt, at))
  }
  return [...statements, ...suppressionOf(env, item, notificationId, now, true)]
}

/**
 * The suppression a hard bounce, a complaint or a provider refusal asks for.
 * `guarded`: only when this delivery recorded the event (a redelivery of it
 * does not undo an operator's removal since).
 */
function suppressionOf(
  env: Env,
  { event, pseudonym }: Decoded,
  notificationId: string | null,
  now: Date,
  guarded: boolean,
): D1PreparedStatement[] {
  const at = now.toISOString()
  const statements: D1PreparedStatement[] = []
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
        guarded ? { provider: event.provider, eventId: event.providerEventId } : undefined,
        pseudonym ?? undefined,
      ),
    )
  }
  return statements
}

/**
 * Events that name no notification yet are retried (NTF_DELIVERY_NOT_LINKED)
 * to give the `sent` mark its moment; the suppression they ask for is written
 * now. A failure to write it retries them all the same.
 */
async function holdForLink(
  env: Env,
  waiting: readonly EventWrite<Decoded>[],
  settlements: Settlements,
  log: Logger,
): Promise<void> {
  if (waiting.length === 0) return
  const statements = waiting.flatMap((write) => write.statements)
  if (statements.length > 0) {
    try {
      await env.DB.batch(statements)
    } catch (error) {
      log.warn('delivery.suppression-failed', { error })
    }
  }
  const error = new PipelineError('NTF_DELIVERY_NOT_LINKED', 'no notification records this message id yet')
  for (const { item } of waiting) {
    settlements.fail(item.message, error, LINK_WAIT_SECONDS)
    log.info('delivery.not-linked-yet', { provider: item.event.provider, attempts: item.message.attempts })
  }
}
