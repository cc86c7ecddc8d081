/**
 * A Cloudflare Queue as the lifecycle model drives it: the Worker sends to it
 * through the binding's own interface (`send`, `sendBatch`, `delaySeconds`),
 * and the model decides what is delivered when — in any order, a message
 * again after it was acknowledged (Queues deliver at least once), or a
 * message lost (a send whose outcome the producer never learnt, local queue
 * contents gone on a restart). What Queues document is kept: a message is not
 * delivered before its delay; a batch holds at most 100; a retried message
 * comes back after its delay with its delivery count raised; one retried past
 * the consumer's `max_retries` goes to its dead-letter queue as it was
 * (https://developers.cloudflare.com/queues/configuration/dead-letter-queues/),
 * and is dropped when there is none. A queue can be told to refuse sends, as
 * a queue that is down does.
 */

/** One message on a model queue. */
export type QueuedMessage = { id: string; body: unknown; attempts: number; visibleAt: number; sentAt: number }

let sequence = 0

export class ModelQueue {
  readonly name: string
  readonly maxRetries: number
  /** Where a message retried past `maxRetries` goes (undefined: dropped, as notify-dlq's are). */
  deadLetterQueue: ModelQueue | undefined
  /** While set, `send` and `sendBatch` throw, as a queue that is down does. */
  refusing = false
  readonly #now: () => number
  #messages: QueuedMessage[] = []
  /** Messages acknowledged, kept so that the model can deliver one again. */
  readonly acked: QueuedMessage[] = []
  /** Messages dropped past their retries (a queue without a dead-letter queue). */
  readonly dropped: QueuedMessage[] = []

  constructor(name: string, maxRetries: number, now: () => number) {
    this.name = name
    this.maxRetries = maxRetries
    this.#now = now
  }

  async send(body: unknown, options?: QueueSendOptions): Promise<void> {
    await this.sendBatch([{ body, delaySeconds: options?.delaySeconds }])
  }

  async sendBatch(messages: Iterable<MessageSendRequest>, options?: QueueSendBatchOptions): Promise<void> {
    if (this.refusing) throw new Error(`Queue ${this.name} is unavailable (the model refuses its sends)`)
    this.put([...messages], options?.delaySeconds)
  }

  /** Puts messages on the queue as the platform does (an event subscription): the Worker's refusal does not apply. */
  put(list: readonly MessageSendRequest[], batchDelay?: number): void {
    if (list.length > 100) throw new Error(`Queue sendBatch() takes at most 100 messages, got ${list.length}`)
    const now = this.#now()
    for (const message of list) {
      sequence += 1
      const delay = message.delaySeconds ?? batchDelay ?? 0
      // A message's body is a copy, as a queue serializes it.
      this.#messages.push({
        id: `${this.name}-${sequence}`,
        body: structuredClone(message.body),
        attempts: 1,
        visibleAt: now + delay * 1000,
        sentAt: now,
      })
    }
  }

  /** Every message waiting, delivered or not yet visible. */
  get waiting(): readonly QueuedMessage[] {
    return this.#messages
  }

  /** The messages deliverable now, oldest first. */
  visible(): QueuedMessage[] {
    const now = this.#now()
    return this.#messages.filter((message) => message.visibleAt <= now)
  }

  /** The earliest time a waiting message becomes deliverable, if any waits. */
  nextVisibleAt(): number | undefined {
    let next: number | undefined
    for (const message of this.#messages) if (next === undefined || message.visibleAt < next) next = message.visibleAt
    return next
  }

  /** Takes these messages off the queue for a delivery. */
  take(messages: readonly QueuedMessage[]): void {
    const taken = new Set(messages)
    this.#messages = this.#messages.filter((message) => !taken.has(message))
  }

  /** A delivered message was acknowledged. */
  ack(message: QueuedMessage): void {
    this.acked.push(message)
  }

  /** A delivered message was retried (or left unsettled): back after its delay, or on to the dead-letter queue. */
  retry(message: QueuedMessage, delaySeconds: number): void {
    if (message.attempts > this.maxRetries) {
      if (this.deadLetterQueue) {
        // Cloudflare moves it as it was: its body, a fresh delivery count.
        sequence += 1
        this.deadLetterQueue.#messages.push({
          id: `${this.deadLetterQueue.name}-${sequence}`,
          body: message.body,
          attempts: 1,
          visibleAt: this.#now(),
          sentAt: this.#now(),
        })
      } else this.dropped.push(message)
      return
    }
    this.#messages.push({ ...message, attempts: message.attempts + 1, visibleAt: this.#now() + delaySeconds * 1000 })
  }

  /** Delivers an acknowledged message once more (at least once: Queues may). */
  redeliver(message: QueuedMessage): void {
    this.#messages.push({ ...message, attempts: message.attempts + 1, visibleAt: this.#now() })
  }

  /** Loses a waiting message (its send's outcome was never known, or a local restart dropped it). */
  lose(message: QueuedMessage): void {
    this.take([message])
  }
}
