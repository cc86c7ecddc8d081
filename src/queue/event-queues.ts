/**
 * notify-events as one queue or several: EVENTS_QUEUE_SHARDS queues, so that
 * ingest is not held to one queue's 5,000 messages a second
 * (`QUEUE_LIMITS`). Each event goes to the shard of its source message id,
 * and every shard has the same consumer: which queue carried an event changes
 * nothing about what it does (deduplication is in D1, by idempotency key, not
 * in the queue).
 */

import { shardOf } from '../crypto.ts'
import { ApiError } from '../errors.ts'
import { eventsBindingOf, eventsQueueOf } from './names.ts'
import { type Outgoing, sendAll } from './send.ts'

/** The producer of every shard, in order; a shard the configuration counts but the Worker lacks is a configuration error. */
export function eventQueues(env: object, shards: number): Queue[] {
  return Array.from({ length: shards }, (_, shard) => {
    const name = eventsBindingOf(shard)
    const queue = (env as Record<string, unknown>)[name] as Queue | undefined
    if (queue === undefined) {
      throw new ApiError(
        'CONFIG_INVALID',
        `EVENTS_QUEUE_SHARDS is ${shards}, but ${name} is not bound: add [[queues.producers]] binding = "${name}", queue = "${eventsQueueOf(shard)}" and its [[queues.consumers]] to wrangler.toml`,
      )
    }
    return queue
  })
}

/**
 * What names an event's shard: the id its source gave the message, which a
 * redelivery keeps. Not the idempotency key: that is read from the decoded
 * body, and ingest does not decode (an event that breaks its contract is to
 * become a dead letter, not a refused request). A body without one (a dead
 * letter's, replayed) is keyed by itself.
 */
function keyOf(body: unknown): string {
  const id = (body as { sourceMessageId?: unknown } | null)?.sourceMessageId
  return typeof id === 'string' ? id : JSON.stringify(body)
}

/**
 * Puts events on notify-events, each on its shard of `queues` (as
 * `eventQueues` gives them); resolves once every shard took its share, and
 * rejects if any did not (the caller sends them all again, which is safe: the
 * consumer deduplicates).
 */
export async function sendEvents(queues: readonly Queue[], events: readonly unknown[]): Promise<void> {
  if (queues.length === 1)
    return sendAll(
      queues[0] as Queue,
      events.map((body) => ({ body })),
    )
  const byShard: Outgoing[][] = queues.map(() => [])
  for (const body of events) byShard[await shardOf(keyOf(body), queues.length)]?.push({ body })
  await Promise.all(byShard.map((messages, shard) => sendAll(queues[shard] as Queue, messages)))
}
