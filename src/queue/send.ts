import { QUEUE_BATCH_MAX_BYTES, QUEUE_BATCH_MAX_MESSAGES, utf8Length } from '@notify-edge/contracts'
import { queueDelay } from './policy.ts'

/** One message to send: a JSON body and an optional delivery delay (cut to what Queues accept, `queueDelay`). */
export type Outgoing = { body: unknown; delaySeconds?: number }

/**
 * Sends JSON messages with as few `sendBatch` calls as the platform limits
 * allow (100 messages, 256 KB per call). Rejects when any call fails; the
 * caller retries the whole set, which is safe because every consumer is idempotent.
 */
export async function sendAll(queue: Queue, messages: readonly Outgoing[]): Promise<void> {
  let chunk: MessageSendRequest[] = []
  let bytes = 0
  const flush = async () => {
    if (chunk.length > 0) await queue.sendBatch(chunk)
    chunk = []
    bytes = 0
  }
  for (const { body, delaySeconds } of messages) {
    const size = utf8Length(JSON.stringify(body))
    if (chunk.length === QUEUE_BATCH_MAX_MESSAGES || bytes + size > QUEUE_BATCH_MAX_BYTES) await flush()
    const request: MessageSendRequest = { body, contentType: 'json' }
    if (delaySeconds !== undefined && delaySeconds > 0) {
      request.delaySeconds = queueDelay(delaySeconds)
    }
    chunk.push(request)
    bytes += size
  }
  await flush()
}
