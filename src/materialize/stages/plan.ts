import { otherPrimaryOf } from '../../d1/shards.ts'
import { PipelineError } from '../../errors.ts'
import { type BatchContext, type ContextQuery, loadContext } from '../context.ts'
import { type DuplicatePlan, planEvent, type RecordPlan } from '../plan-event.ts'
import { describe, type EventItem, type EventsRun, identityOf, type Work } from '../run.ts'
import type { Ignored, Valid } from './decode.ts'
import type { Known } from './known.ts'

/** A valid event planned to be recorded: its processed mark, notifications and contact. */
export type PlannedRecord = EventItem & { type: 'record'; plan: RecordPlan }

/** A valid event D1 has processed already: it ends once its pending notifications are enqueued again. */
export type PlannedDuplicate = EventItem & { type: 'duplicate'; plan: DuplicatePlan }

/** What planning lets through, in batch order; the ignored events go on as they are, to be recorded. */
export type Planned = PlannedRecord | PlannedDuplicate | Ignored

/**
 * Stage 3: read what planning needs (one D1 round trip for the whole batch),
 * then plan each event on its own: a planning error fails that event only.
 */
export async function planStage(run: EventsRun, known: readonly Known[]): Promise<Planned[]> {
  const valid = known.filter((item) => item.type === 'valid')
  const context = valid.length > 0 ? await contextOf(run, valid) : undefined
  const planned: Planned[] = []
  for (const item of known) {
    if (item.type === 'ignored') planned.push(item)
    // Without a context every valid event has failed already.
    else if (context) {
      const made = await planOne(run, item, context)
      if (made) planned.push(made)
    }
  }
  return planned
}

/** The batch's context, or undefined when D1 could not be read: then every valid event fails (retried). */
async function contextOf(run: EventsRun, valid: readonly Valid[]): Promise<BatchContext | undefined> {
  try {
    return await loadContext(run.db, contextQuery(valid.map((item) => item.work)), otherPrimaryOf(run.env))
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 read: ${(cause as Error).message}`, { cause })
    for (const item of valid) run.fail(item, error, fieldsOf(item))
    return undefined
  }
}

/** One event's plan; an event whose planning failed is settled here and goes no further. */
async function planOne(run: EventsRun, item: Valid, context: BatchContext): Promise<Planned | undefined> {
  const { work } = item
  try {
    const plan = await planEvent(work, context, run.config, run.now)
    if (plan.type === 'duplicate') return { ...item, type: 'duplicate', plan }
    if (plan.type === 'record') return { ...item, type: 'record', plan: await partOf(run, plan) }
    run.fail(item, plan.error, fieldsOf(item), work.intent.type === 'notify' ? work.intent.kind : undefined)
  } catch (error) {
    run.fail(item, error, fieldsOf(item))
  }
  return undefined
}

/**
 * What of a plan this run writes: with D1 shards, the notifications and the
 * contact of the recipients its shard holds. The plan is made whole in every
 * shard the event touches, from that shard's context; each keeps its own.
 */
async function partOf(run: EventsRun, plan: RecordPlan): Promise<RecordPlan> {
  const { part } = run
  if (part === undefined) return plan
  const held = await Promise.all(plan.notifications.map((row) => part.holds(row.recipientUserId)))
  const notifications = plan.notifications.filter((_, index) => held[index])
  const { contact, ...rest } = plan
  return contact && (await part.holds(contact.userId))
    ? { ...rest, notifications, contact }
    : { ...rest, notifications }
}

function fieldsOf(item: EventItem) {
  return { ...describe(item.inbound), ...identityOf(item.work.event) }
}

function contextQuery(works: readonly Work[]): ContextQuery {
  const userIds: string[] = []
  const kinds = new Set<string>()
  const decisionPersons: string[] = []
  const cancellationKeys: string[] = []
  let needPool = false
  for (const { intent } of works) {
    if (intent.type !== 'notify') continue
    if (intent.cancellationKey !== undefined) cancellationKeys.push(intent.cancellationKey)
    kinds.add(intent.kind)
    if (intent.recipients === 'reviewer-pool') needPool = true
    else userIds.push(...intent.recipients.map((recipient) => recipient.userId))
    if (intent.decision) decisionPersons.push(intent.decision.person)
  }
  return {
    events: works.map(({ event }) => ({ eventId: event.eventId, idempotencyKey: event.idempotencyKey })),
    userIds,
    needPool,
    kinds: [...kinds],
    decisionPersons,
    cancellationKeys,
  }
}
