import { type Config, configOf } from '../config.ts'
import type { InboundEvent } from '../contracts/index.ts'
import type { PipelineCode } from '../errors.ts'
import type { DecodedEvent } from '../events/decode-inbound.ts'
import type { Intent } from '../events/define.ts'
import type { Logger } from '../log.ts'
import { COUNTERS, CounterBatch } from '../metrics/counters.ts'
import { countRoundTrips } from '../metrics/round-trips.ts'
import { newCountMark } from '../notifications/counted.ts'
import { Settlements } from '../queue/settlements.ts'

/** A valid event with what it asks for: what planning reads. */
export type Work = { event: DecodedEvent; source: string; intent: Intent }

/**
 * What one D1 shard's run of a batch writes (src/materialize/shards.ts):
 * the recipients it holds, and the messages whose events it counts — each
 * event is counted in one shard only, its first.
 */
export type ShardPart = {
  /** Whether this shard holds a recipient's rows (the shard of its bucket: src/d1/shards.ts). */
  holds: (userId: string) => Promise<boolean>
  counts: ReadonlySet<Message<unknown>>
}

/** A message of the batch, with its inbound event once it parsed as one: what `EventsRun` settles. */
export type Received = { message: Message<unknown>; inbound?: InboundEvent }

/** A message whose body is a valid event: where it came from and what it asks for. */
export type EventItem = { message: Message<unknown>; inbound: InboundEvent; work: Work }

/**
 * The state of one `notify-events` batch: its clock, id, counted D1
 * binding, counters, and each message's settlement. Settlements are decided
 * here and nowhere else: `deadLetter`, `fail`, `ack`. The stages pass what
 * they produced from one to the next; a message leaves that flow where it is
 * settled, and the ones that reach the end are acked there.
 */
export class EventsRun {
  readonly config: Config
  readonly now: Date
  readonly nowIso: string
  /**
   * This run's id, written on the processed-event rows it inserts (their
   * `claim` column): an event's counters count only for the run that won its row.
   */
  readonly id = crypto.randomUUID()
  /** The mark its notification inserts carry, to count them in the same transaction (src/notifications/counted.ts). */
  readonly countMark = newCountMark()
  readonly db: D1Database
  readonly roundTrips: () => number
  readonly counters = new CounterBatch()
  readonly log: Logger
  readonly env: Env
  /** How many messages the batch holds. */
  readonly size: number
  /** The queue that delivered it: notify-events or one of its shards. */
  readonly queue: string
  /** Each message's settlement, under the events retry policy (RETRY_DELAYS_SECONDS). */
  readonly settlements: Settlements

  /** With D1 shards: which part of each event this run writes; undefined with one database (all of it). */
  readonly part: ShardPart | undefined

  constructor(batch: MessageBatch<unknown>, env: Env, log: Logger, part?: ShardPart) {
    this.part = part
    this.config = configOf(env)
    this.now = new Date()
    this.nowIso = this.now.toISOString()
    const counted = countRoundTrips(env.DB)
    this.db = counted.db
    this.roundTrips = counted.roundTrips
    this.log = log
    this.env = env
    this.size = batch.messages.length
    this.queue = batch.queue
    this.settlements = new Settlements(this.config.RETRY_DELAYS_SECONDS)
  }

  /** Whether this run counts the event of `message` in `notify_events_total` (with shards, its first shard does). */
  countsEvent(message: Message<unknown>): boolean {
    return this.part === undefined || this.part.counts.has(message)
  }

  /** Counts an outcome of `notify_events_total` (written with the batch, or after it). */
  count(source: string, outcome: string): void {
    this.counters.add(COUNTERS.events, { source, outcome })
  }

  /** Ends a message that cannot succeed (its codes are `dead-letter` codes): a dead letter, as the error table decides. */
  deadLetter(item: Received, code: PipelineCode, error: string, fields: Record<string, unknown>): void {
    const settled = this.settlements.failWith(item.message, { code, error })
    if (settled.action === 'dead-letter' && this.part === undefined) {
      this.count(item.inbound?.source ?? 'unknown', 'dead-lettered')
    }
    this.log.warn('event.invalid', { ...fields, code, error })
  }

  /** Ends a message by the retry policy: retried while attempts remain, then a dead letter. */
  fail(item: Received, error: unknown, fields: Record<string, unknown>, kind?: string): void {
    const settled = this.settlements.fail(item.message, error)
    if (settled.action === 'dead-letter' && kind) this.settlements.settle(item.message, { ...settled, kind })
    // A shard's run does not count it: the batch's own run does, once, for the settlement all its shards
    // came to (./shards.ts).
    if (settled.action === 'dead-letter' && this.part === undefined) {
      this.count(String(fields.source ?? item.inbound?.source), 'dead-lettered')
    }
    this.log.warn(`event.${settled.action}`, {
      ...fields,
      attempts: item.message.attempts,
      code: settled.code,
      error: settled.error,
    })
  }

  /** Ends a message that is done with (processed, ignored, or a duplicate). */
  ack(item: Received): void {
    this.settlements.ack(item.message)
  }
}

/** Where an event came from, for log lines. */
export function describe(inbound: InboundEvent) {
  return { source: inbound.source, origin: inbound.origin, sourceMessageId: inbound.sourceMessageId }
}

/** Who an event is, for log lines. */
export function identityOf(event: DecodedEvent) {
  return {
    eventId: event.eventId,
    eventType: event.eventType,
    idempotencyKey: event.idempotencyKey,
    traceId: event.traceId,
  }
}
