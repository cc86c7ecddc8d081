import { type Config, configOf } from '../config.ts'
import type { DecodedEvent, InboundEvent } from '../contracts/index.ts'
import type { WriteResult } from '../d1-batch.ts'
import type { PipelineCode } from '../errors.ts'
import type { Intent } from '../events/define.ts'
import type { Logger } from '../log.ts'
import { COUNTERS, CounterBatch } from '../metrics/counters.ts'
import { countRoundTrips } from '../metrics/round-trips.ts'
import { type Settlement, settle, settleFailure } from '../queue/policy.ts'
import type { Plan } from './plan-event.ts'
import type { ProcessedEvent } from './processed.ts'

/** A valid event of the batch with what it asks for. */
export type Work = { event: DecodedEvent; source: string; attempts: number; intent: Intent }

/**
 * One message of the batch as it goes through the stages. Each stage reads
 * what the ones before it left and adds its part; a message leaves the
 * pipeline when it gets its settlement, which is set once, by `BatchRun`.
 */
export type Entry = {
  message: Message<unknown>
  inbound?: InboundEvent
  /** A valid event to plan. */
  work?: Work
  /** A handled event type that asks for nothing, recorded as processed so that it stays deduplicated. */
  ignored?: ProcessedEvent
  plan?: Plan
  /** The digests its write may open: the open statement's place among the event's statements, the digest's id and close. */
  opens?: { statement: number; id: string; closesAt: string }[]
  /** Its throttled notifications: the statement that counts one sent, the notification's id and due time. */
  counted?: { statement: number; id: string; scheduledAt: string }[]
  written?: WriteResult
  settlement?: Settlement
}

/**
 * The state of one `notify-events` batch: its clock, claim, counted D1
 * binding, counters, and its messages. Settlements are decided here and
 * nowhere else: `deadLetter`, `fail`, `ack`.
 */
export class BatchRun {
  readonly config: Config
  readonly now: Date
  readonly nowIso: string
  /** Marks this batch's processed-event rows: counters of an event count only for the batch that won it. */
  readonly claim = crypto.randomUUID()
  readonly db: D1Database
  readonly roundTrips: () => number
  readonly counters = new CounterBatch()
  readonly log: Logger
  readonly env: Env
  readonly entries: Entry[]

  constructor(batch: MessageBatch<unknown>, env: Env, log: Logger) {
    this.config = configOf(env)
    this.now = new Date()
    this.nowIso = this.now.toISOString()
    const counted = countRoundTrips(env.DB)
    this.db = counted.db
    this.roundTrips = counted.roundTrips
    this.log = log
    this.env = env
    this.entries = batch.messages.map((message) => ({ message }))
  }

  /** Entries not settled yet. */
  open(): Entry[] {
    return this.entries.filter((entry) => !entry.settlement)
  }

  /** Counts an outcome of `notify_events_total` (written with the batch, or after it). */
  count(source: string, outcome: string): void {
    this.counters.add(COUNTERS.events, { source, outcome })
  }

  /** Ends a message that cannot succeed (its codes are `dead-letter` codes): a dead letter, as the error table decides. */
  deadLetter(entry: Entry, code: PipelineCode, error: string, fields: Record<string, unknown>): void {
    entry.settlement = settle({ code, error }, entry.message.attempts, this.config.RETRY_DELAYS_SECONDS)
    if (entry.settlement.action === 'dead-letter') this.count(entry.inbound?.source ?? 'unknown', 'dead-lettered')
    this.log.warn('event.invalid', { ...fields, code, error })
  }

  /** Ends a message by the retry policy: retried while attempts remain, then a dead letter. */
  fail(entry: Entry, error: unknown, fields: Record<string, unknown>, kind?: string): void {
    const settled = settleFailure(error, entry.message.attempts, this.config.RETRY_DELAYS_SECONDS)
    entry.settlement = settled.action === 'dead-letter' && kind ? { ...settled, kind } : settled
    if (settled.action === 'dead-letter') this.count(String(fields.source ?? entry.inbound?.source), 'dead-lettered')
    this.log.warn(`event.${settled.action}`, {
      ...fields,
      attempts: entry.message.attempts,
      code: settled.code,
      error: settled.error,
    })
  }

  /** Ends a message that is done with (processed, ignored, or a duplicate). */
  ack(entry: Entry): void {
    entry.settlement = { action: 'ack' }
  }

  /** Every message's settlement. */
  settlements(): Map<Message<unknown>, Settlement> {
    return new Map(this.entries.flatMap((entry) => (entry.settlement ? [[entry.message, entry.settlement]] : [])))
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
