import { configOf } from '../config.ts'
import {
  decodeInbound,
  describeIssues,
  type InboundEvent,
  InboundEventSchema,
  toFieldIssues,
} from '../contracts/index.ts'
import { PipelineError } from '../errors.ts'
import type { Logger } from '../log.ts'
import { type Settlement, settleFailure } from '../queue/policy.ts'
import { settleBatch } from '../queue/settle.ts'
import { insertProcessedEvent, type ProcessedEvent } from './processed.ts'

/**
 * Consumer of `notify-events`: decode and validate each inbound event, then
 * record the valid ones in one D1 batch. Every message ends in exactly one of
 * ack, retry (5 s, 30 s) or dead letter; this function never throws.
 *
 * Invalid events are dead-lettered at once (`NTF_INVALID_PAYLOAD`, naming the
 * field). Until materialization exists, a valid event ends as `accepted`.
 */
export async function consumeEvents(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const config = configOf(env)
  const settlements = new Map<Message<unknown>, Settlement>()
  const valid: { message: Message<unknown>; row: ProcessedEvent }[] = []

  for (const message of batch.messages) {
    const inbound = InboundEventSchema.safeParse(message.body)
    if (!inbound.success) {
      const issues = toFieldIssues(inbound.error)
      const error = `not an InboundEvent: ${describeIssues(issues)}`
      settlements.set(message, { action: 'dead-letter', code: 'NTF_INVALID_PAYLOAD', error })
      log.warn('event.invalid', { messageId: message.id, code: 'NTF_INVALID_PAYLOAD', error })
      continue
    }
    const decoded = decodeInbound(inbound.data)
    const where = describe(inbound.data)
    if (decoded.status === 'invalid') {
      settlements.set(message, { action: 'dead-letter', code: decoded.code, error: decoded.message })
      log.warn('event.invalid', { ...where, ...decoded.identity, code: decoded.code, error: decoded.message })
    } else if (decoded.status === 'ignored') {
      settlements.set(message, { action: 'ack' })
      log.info('event.ignored-event', { ...where, ...decoded.identity, reason: decoded.reason })
    } else {
      for (const warning of decoded.event.warnings) log.warn('event.contract-warning', { ...where, warning })
      valid.push({ message, row: { inbound: inbound.data, event: decoded.event, outcome: 'accepted' } })
    }
  }

  if (valid.length > 0) {
    const now = new Date().toISOString()
    try {
      const results = await env.DB.batch(valid.map(({ row }) => insertProcessedEvent(env.DB, row, now)))
      valid.forEach(({ message, row }, index) => {
        const outcome = results[index]?.meta.changes === 0 ? 'skipped-duplicate' : row.outcome
        settlements.set(message, { action: 'ack' })
        log.info(`event.${outcome}`, {
          ...describe(row.inbound),
          eventType: row.event.eventType,
          eventId: row.event.eventId,
          idempotencyKey: row.event.idempotencyKey,
        })
      })
    } catch (cause) {
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1: ${(cause as Error).message}`, { cause })
      for (const { message, row } of valid) {
        const settlement = settleFailure(error, message.attempts, config.RETRY_DELAYS_SECONDS)
        settlements.set(message, settlement)
        log.warn(`event.${settlement.action}`, {
          ...describe(row.inbound),
          eventId: row.event.eventId,
          attempts: message.attempts,
          code: settlement.action === 'ack' ? undefined : settlement.code,
          error: settlement.action === 'ack' ? undefined : settlement.error,
        })
      }
    }
  }

  await settleBatch(batch, settlements, {
    dlq: env.DLQ,
    log,
    fallbackDelaySeconds: config.RETRY_DELAYS_SECONDS.at(-1) ?? 30,
  })
}

function describe(inbound: InboundEvent) {
  return { source: inbound.source, origin: inbound.origin, sourceMessageId: inbound.sourceMessageId }
}
