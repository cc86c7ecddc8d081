import { QUEUE_BATCH_MAX_BYTES, QUEUE_BATCH_MAX_MESSAGES, utf8Length } from '../contracts/limits.ts'

/**
 * Sends JSON bodies with as few `sendBatch` calls as the platform limits allow
 * (100 messages, 256 KB per call). Rejects when any call fails; the caller
 * retries the whole set, which is safe because every consumer is idempotent.
 */
export async function sendAll(queue: Queue, bodies: readonly unknown[], options: { delaySeconds?: number } = {}) {
  let chunk: MessageSendRequest[] = []
  let bytes = 0
  const flush = async () => {
    if (chunk.length > 0) await queue.sendBatch(chunk, options)
    chunk = []
    bytes = 0
  }
  for (const body of bodies) {
    const size = utf8Length(JSON.stringify(body))
    if (chunk.length === QUEUE_BATCH_MAX_MESSAGES || bytes + size > QUEUE_BATCH_MAX_BYTES) await flush()
    chunk.push({ body, contentType: 'json' })
    bytes += size
  }
  await flush()
}
