/** The queues of notify-edge, as named in wrangler.toml. */
export const QUEUES = {
  events: 'notify-events',
  dispatch: 'notify-dispatch',
  emailEvents: 'notify-email-events',
  deadLetters: 'notify-dlq',
} as const

/** A queue of notify-edge. */
export type QueueName = (typeof QUEUES)[keyof typeof QUEUES]
