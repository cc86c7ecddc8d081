import type { Logger } from '../log.ts'
import { deadLetterEnvelope } from './dead-letter-envelope.ts'
import { FALLBACK_DELAY_SECONDS, type Settlement } from './policy.ts'
import { sendAll } from './send.ts'

/**
 * Ends every message of a batch exactly once: `ack()`, `retry()` with its
 * delay, or a dead letter on `notify-dlq` followed by `ack()`. Dead letters go
 * out in one `sendBatch`; if that fails, their messages are retried instead of
 * acked (after the policy's `FALLBACK_DELAY_SECONDS`), so a message is never
 * acked before it reached the queue or the dead-letter store.
 */
export async function settleBatch(
  batch: MessageBatch<unknown>,
  settlements: ReadonlyMap<Message<unknown>, Settlement>,
  deps: { dlq: Queue; log: Logger },
): Promise<void> {
  const dead = batch.messages.filter((message) => settlements.get(message)?.action === 'dead-letter')
  let deadLettersSent = true
  if (dead.length > 0) {
    const envelopes = dead.map((message) => {
      const settlement = settlements.get(message) as Extract<Settlement, { action: 'dead-letter' }>
      return deadLetterEnvelope(batch.queue, message, settlement)
    })
    try {
      await sendAll(
        deps.dlq,
        envelopes.map((body) => ({ body })),
      )
    } catch (error) {
      deadLettersSent = false
      deps.log.error('dead-letter.send-failed', { queue: batch.queue, count: dead.length, error })
    }
  }
  for (const message of batch.messages) {
    const settlement = settlements.get(message)
    if (settlement === undefined) {
      // A message the consumer did not settle is a bug; retrying keeps it.
      deps.log.error('message.unsettled', { queue: batch.queue, messageId: message.id })
      message.retry({ delaySeconds: FALLBACK_DELAY_SECONDS })
    } else if (settlement.action === 'ack') {
      message.ack()
    } else if (settlement.action === 'retry') {
      message.retry({ delaySeconds: settlement.delaySeconds })
    } else if (deadLettersSent) {
      message.ack()
    } else {
      message.retry({ delaySeconds: FALLBACK_DELAY_SECONDS })
    }
  }
}
