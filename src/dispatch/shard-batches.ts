import { shardOfId } from '../d1/shards.ts'

/**
 * A batch's messages split by the D1 shard of the id each names (`idOf` of
 * its body; a body without one goes to the primary, whose consumer ends it as
 * it would have), as batches of their own: each part is settled by its own
 * consumer run, message by message, and every message is in exactly one part.
 */
export function bySharded(
  batch: MessageBatch<unknown>,
  count: number,
  idOf: (body: unknown) => unknown,
): [number, MessageBatch<unknown>][] {
  const parts = new Map<number, Message<unknown>[]>()
  for (const message of batch.messages) {
    const id = idOf(message.body)
    const shard = typeof id === 'string' ? shardOfId(id, count) : 0
    parts.set(shard, [...(parts.get(shard) ?? []), message])
  }
  return [...parts].map(([shard, messages]) => [shard, partOf(batch, messages)])
}

/** Some of a batch's messages as a batch of their own: its `ackAll` and `retryAll` reach those messages only. */
export function partOf(batch: MessageBatch<unknown>, messages: readonly Message<unknown>[]): MessageBatch<unknown> {
  return {
    queue: batch.queue,
    metadata: batch.metadata,
    messages,
    ackAll: () => {
      for (const message of messages) message.ack()
    },
    retryAll: (options) => {
      for (const message of messages) message.retry(options)
    },
  }
}
