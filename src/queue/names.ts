/** The queues of notify-edge, as named in wrangler.toml. */
export const QUEUES = {
  events: 'notify-events',
  dispatch: 'notify-dispatch',
  emailEvents: 'notify-email-events',
  deadLetters: 'notify-dlq',
} as const

/** A queue of notify-edge. */
export type QueueName = (typeof QUEUES)[keyof typeof QUEUES]

/** The queue of shard `shard`: the first keeps notify-events' own name, so one shard is the queue it always was. */
export function eventsQueueOf(shard: number): string {
  return shard === 0 ? QUEUES.events : `${QUEUES.events}-${shard}`
}

/** The producer binding of shard `shard`: EVENTS, EVENTS_1, … */
export function eventsBindingOf(shard: number): string {
  return shard === 0 ? 'EVENTS' : `EVENTS_${shard}`
}

const SHARD_QUEUE = new RegExp(`^${QUEUES.events}-[1-9][0-9]*$`)

/** Whether a batch came from notify-events or one of its shards. */
export function isEventsQueue(name: string): boolean {
  return name === QUEUES.events || SHARD_QUEUE.test(name)
}

/**
 * The queue a batch's messages belong to, as dead letters, replays and
 * metrics name it: notify-events for every shard of it, so a dead letter is
 * replayed, filtered and counted the same whichever shard carried it.
 */
export function logicalQueueOf(name: string): string {
  return isEventsQueue(name) ? QUEUES.events : name
}
