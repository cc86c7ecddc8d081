import type { Config } from '../config.ts'
import { pseudonymOf } from '../erasure/pseudonym.ts'
import type { PipelineError } from '../errors.ts'
import type { DigestSchedule, Intent, RecipientRef } from '../events/define.ts'
import { deliveryModeOf, deliveryOf, kindOf } from '../events/registry.ts'
import { sameDecision } from '../notifications/decision.ts'
import type { Throttle } from '../notifications/row.ts'
import { type NotificationRow, newNotificationId, notificationId } from '../notifications/row.ts'
import { optOutKey } from '../preferences/preference-store.ts'
import { type RenderedParts, renderNotification, unsubscribeLink } from '../templates/render-notification.ts'
import type { Contact } from './contacts.ts'
import type { BatchContext } from './context.ts'
import { digestCloseAt } from './digest-schedule.ts'
import type { Work } from './run.ts'

/** How an event ends, as logged and counted. */
export type Outcome =
  | 'enqueued'
  | 'digested'
  | 'undeliverable'
  | 'awaiting-contact'
  | 'opted-out'
  | 'no-recipients'
  | 'no-channels'
  | 'ignored-event'
  | 'contact-upserted'
  | 'skipped-duplicate'
  | 'cancellation'
  | 'cancelled'

/** An event D1 has processed already: its notifications still `pending`, to enqueue again. */
export type DuplicatePlan = { type: 'duplicate'; redispatch: { id: string; scheduledAt: string }[] }

/** An event to record: its outcome, its notifications and the contact it upserts. */
export type RecordPlan = {
  type: 'record'
  outcome: Outcome
  kind?: string
  notifications: NotificationRow[]
  contact?: Contact
  note?: string
  /** A cancelling event's cancellation, which the cancel stage applies before the write. */
  cancel?: { key: string; reason?: string }
}

/** What materialize does with one valid event. */
export type Plan = DuplicatePlan | { type: 'fail'; error: PipelineError } | RecordPlan

type Notify = Extract<Intent, { type: 'notify' }>
type Recipient = RecipientRef

/** What a notification is made from: its event's identity and the parts of its intent one notification needs. */
export type NotificationSource = {
  work: Pick<Work, 'source'> & { event: Pick<Work['event'], 'eventId' | 'idempotencyKey'> }
  intent: Pick<Notify, 'kind' | 'urgency' | 'model' | 'decision' | 'traceId' | 'cancellationKey'>
}

/**
 * Decides what one event becomes, from the batch context alone (no I/O):
 * recipients (deduplicated), channels, contact snapshot, template and
 * rendering, quiet hours. A contact upsert also updates `context.contacts`,
 * so later events of the same batch see it.
 */
export async function planEvent(work: Work, context: BatchContext, config: Config, now: Date): Promise<Plan> {
  const { event, intent } = work
  if (context.processed.has(event.idempotencyKey)) {
    return { type: 'duplicate', redispatch: context.pendingByEvent.get(event.idempotencyKey) ?? [] }
  }
  if (intent.type === 'ignored')
    return { type: 'record', outcome: 'ignored-event', notifications: [], note: intent.reason }
  if (intent.type === 'cancel') {
    const cancel = { key: intent.key, ...(intent.reason === undefined ? {} : { reason: intent.reason }) }
    return { type: 'record', outcome: 'cancellation', notifications: [], cancel, note: `cancels ${intent.key}` }
  }
  if (intent.type === 'contact') {
    const known = context.contacts.get(intent.contact.userId)
    if (!known || known.version < intent.contact.version) context.contacts.set(intent.contact.userId, intent.contact)
    return { type: 'record', outcome: 'contact-upserted', notifications: [], contact: intent.contact }
  }
  return planNotify(work, intent, context, config, now)
}

async function planNotify(work: Work, intent: Notify, context: BatchContext, config: Config, now: Date): Promise<Plan> {
  const record = (outcome: Outcome, notifications: NotificationRow[] = []): RecordPlan => ({
    type: 'record',
    outcome,
    kind: intent.kind,
    notifications,
  })
  const { decision } = intent
  // Cancelled before it came (out of order across sources): it creates nothing.
  if (intent.cancellationKey !== undefined && context.cancelled.has(intent.cancellationKey)) {
    return { ...record('cancelled'), note: `${intent.cancellationKey} was cancelled before this event arrived` }
  }
  if (
    decision?.fallback &&
    context.authoritative.some((row) => sameDecision(row, decision, config.DECISION_MATCH_SECONDS))
  ) {
    return {
      ...record('ignored-event'),
      note: 'verification decision already notified from verification-requests (authoritative)',
    }
  }
  const recipients = dedupe(
    intent.recipients === 'reviewer-pool' ? context.reviewerPool.map((userId) => ({ userId })) : intent.recipients,
  )
  if (recipients.length === 0) return record('no-recipients')
  const channels = channelsOf(intent, context)
  if (channels.length === 0) return record('no-channels')
  const notifications: NotificationRow[] = []
  // The in-app item first: an email that escalates waits for it, and only for one that is to be shown.
  const order = channels.includes('in-app')
    ? ['in-app', ...channels.filter((channel) => channel !== 'in-app')]
    : channels
  for (const recipient of recipients) {
    const byChannel = new Map<string, NotificationRow>()
    for (const channel of order) {
      const escalation = channel === 'email' ? escalationOf(intent.kind, byChannel.get('in-app')) : undefined
      const made = await notificationFor(work, intent, recipient, channel, context, config, now, escalation)
      if ('error' in made) return { type: 'fail', error: made.error }
      byChannel.set(channel, made)
    }
    for (const channel of channels) notifications.push(byChannel.get(channel) as NotificationRow)
  }
  return record(outcomeOf(notifications), notifications)
}

/**
 * The escalation an email of `kind` waits on: its kind's, when the same
 * recipient's in-app item is to be shown (a recipient who turned the in-app
 * channel off, or a kind not shown in-app here, gets the email at once).
 */
function escalationOf(kind: string, inApp: NotificationRow | undefined): NotificationRow['escalation'] {
  const declared = kindOf(kind)?.escalation
  if (!declared || inApp?.status !== 'pending') return undefined
  return { of: inApp.id, unless: declared.unless }
}

/**
 * An event's outcome from its notifications: enqueued if any is to be sent
 * on its own, else digested if any is told in a digest, else waiting for a
 * contact if any is.
 */
function outcomeOf(notifications: readonly NotificationRow[]): Outcome {
  if (notifications.some((row) => row.status === 'pending' || row.status === 'escalating')) return 'enqueued'
  if (notifications.some((row) => row.status === 'digested')) return 'digested'
  if (notifications.some((row) => row.status === 'awaiting-contact')) return 'awaiting-contact'
  return notifications.some((row) => row.status === 'opted-out') ? 'opted-out' : 'undeliverable'
}

/** The channels of a kind at an urgency: the stored policy, else the kind's own default. */
function channelsOf(intent: Notify, context: BatchContext): readonly string[] {
  return context.channels.get(`${intent.kind}|${intent.urgency}`) ?? kindOf(intent.kind)?.channels ?? ['email']
}

/**
 * One notification for a recipient and channel, as planning makes it — also
 * when a notification that waited for its contact is released
 * (./release-waiting.ts): opted out (an optional kind
 * the recipient turned off), waiting for its contact (the replica may lag by
 * minutes: the contact's arrival releases it, CONTACT_WAIT_HOURS ends the
 * wait as a dead letter; it is then sent on its own, not digested), told in
 * the recipient's digest of the kind (its model kept for the digest's
 * render), waiting for its in-app item to go unseen (`escalation`: planned
 * again when the wait ends, with the escalation's decision), or rendered and
 * scheduled, with its unsubscribe link when the kind is optional.
 */
export async function notificationFor(
  work: NotificationSource['work'],
  intent: NotificationSource['intent'],
  recipient: Recipient,
  channel: string,
  context: BatchContext,
  config: Config,
  now: Date,
  escalation?: NotificationRow['escalation'],
): Promise<NotificationRow | { error: PipelineError }> {
  const base = await baseRow(work, intent, recipient, channel, context, config)
  const optional = kindOf(intent.kind)?.category === 'optional'
  if (optional && context.optedOut.has(optOutKey(recipient.userId, intent.kind, channel))) {
    return unsent(base, 'opted-out', `the recipient opted out of ${intent.kind} by ${channel}`, null, now)
  }
  // Decided at the end of its wait, as planning decides then (its contact, digest, throttle, quiet hours).
  if (escalation) return escalating(base, recipient, intent, escalation, config, now)
  // An in-app item needs its recipient's id only, which every event names: it never waits for a contact.
  if (base.recipientEmail === null && channel !== 'in-app') {
    const until = new Date(now.getTime() + config.CONTACT_WAIT_HOURS * 3_600_000)
    return {
      ...base,
      ...unrendered,
      status: 'awaiting-contact',
      statusReason: `waiting for the contact of user ${recipient.userId} (the replica may lag)`,
      errorCode: null,
      unsubscribeUrl: null,
      scheduledAt: until.toISOString(),
      model: JSON.stringify(intent.model),
    }
  }
  const mode = deliveryModeOf(
    intent.kind,
    channel,
    context.modes.get(optOutKey(recipient.userId, intent.kind, channel)),
  )
  if (mode === 'digest') return digested(base, intent, channel, config, now)
  const made = await renderNotification(
    { kind: intent.kind, urgency: intent.urgency, model: intent.model },
    { userId: recipient.userId, name: base.recipientName, locale: base.locale, timeZone: base.timeZone },
    { channel, isFallback: base.isFallback },
    context.templates,
    config,
    now,
  )
  if ('error' in made) return made
  const row: NotificationRow = { ...base, ...made, status: 'pending', statusReason: null, errorCode: null, model: null }
  const throttle = throttleOf(intent, channel, base, config, now)
  return throttle ? { ...row, throttle } : row
}

/**
 * The throttle of a kind on a channel, for a notification sent at once: its
 * limit and window, and — for a kind with a digest — the digest it folds into
 * past the limit (src/notifications/throttle.ts decides, in the write).
 */
function throttleOf(
  intent: NotificationSource['intent'],
  channel: string,
  base: BaseRow,
  config: Config,
  now: Date,
): Throttle | undefined {
  const policy = deliveryOf(intent.kind, channel)
  if (!policy.throttle) return undefined
  const { max, windowMinutes } = policy.throttle
  const closesAt = policy.digest && digestCloseAt(policy.digest, now, base.timeZone, config.DIGEST_WINDOW_SECONDS)
  return {
    max,
    windowMinutes,
    windowFloor: new Date(now.getTime() - windowMinutes * 60_000).toISOString(),
    digest: closesAt ? { id: newNotificationId(base.id), closesAt: closesAt.toISOString() } : undefined,
    model: JSON.stringify(intent.model),
  }
}

/**
 * A notification told in its recipient's digest of the kind: its model, and
 * the digest it opens when none is open — a new id, closing by the kind's
 * schedule (or DIGEST_WINDOW_SECONDS) in the recipient's zone.
 */
async function digested(
  base: BaseRow,
  intent: NotificationSource['intent'],
  channel: string,
  config: Config,
  now: Date,
): Promise<NotificationRow> {
  const schedule = deliveryOf(intent.kind, channel).digest as DigestSchedule
  const closesAt = digestCloseAt(schedule, now, base.timeZone, config.DIGEST_WINDOW_SECONDS)
  const unsubscribeUrl = await unsubscribeLink(config, { userId: base.recipientUserId, kind: intent.kind, channel })
  return {
    ...base,
    ...unrendered,
    status: 'digested',
    statusReason: null,
    errorCode: null,
    unsubscribeUrl,
    scheduledAt: now.toISOString(),
    model: JSON.stringify(intent.model),
    digest: { id: newNotificationId(base.id), closesAt: closesAt.toISOString() },
  }
}

/**
 * An email that waits for its in-app item (src/notifications/escalation.ts):
 * its model kept, nothing rendered yet, the address only when its event
 * carried one, due when the wait ends (the kind's `afterMinutes`, or
 * ESCALATION_AFTER_SECONDS).
 */
function escalating(
  base: BaseRow,
  recipient: Recipient,
  intent: NotificationSource['intent'],
  escalation: NonNullable<NotificationRow['escalation']>,
  config: Config,
  now: Date,
): NotificationRow {
  const seconds = config.ESCALATION_AFTER_SECONDS ?? (kindOf(intent.kind)?.escalation?.afterMinutes ?? 0) * 60
  // Only what the event carried: planned again when the wait ends, the email goes to the contact as it is then.
  const inline = recipient.inline !== undefined
  return {
    ...base,
    ...(inline ? {} : { recipientEmail: null, recipientName: null, recipientHash: null }),
    ...unrendered,
    status: 'escalating',
    statusReason: `sent only if its in-app item is not ${escalation.unless} by then`,
    errorCode: null,
    unsubscribeUrl: null,
    scheduledAt: new Date(now.getTime() + seconds * 1000).toISOString(),
    model: JSON.stringify(intent.model),
    escalation,
  }
}

type BaseRow = Omit<
  NotificationRow,
  'status' | 'statusReason' | 'errorCode' | 'scheduledAt' | 'unsubscribeUrl' | 'model' | keyof RenderedParts
> & { locale: string; timeZone: string }

/** What a notification is about, whatever becomes of it: event, kind, recipient snapshot, decision. */
async function baseRow(
  work: NotificationSource['work'],
  intent: NotificationSource['intent'],
  recipient: Recipient,
  channel: string,
  context: BatchContext,
  config: Config,
): Promise<BaseRow> {
  const { event } = work
  const contact = context.contacts.get(recipient.userId)
  const { decision } = intent
  const recipientEmail = recipient.inline?.email ?? contact?.email ?? null
  return {
    id: await notificationId(event.eventId, recipient.userId, channel, intent.kind),
    idempotencyKey: event.idempotencyKey,
    eventId: event.eventId,
    source: work.source,
    kind: intent.kind,
    channel,
    urgency: intent.urgency,
    recipientUserId: recipient.userId,
    recipientEmail,
    recipientHash: recipientEmail === null ? null : await pseudonymOf(recipientEmail, config.erasureKey),
    recipientName: recipient.inline?.displayName ?? contact?.displayName ?? null,
    locale: contact?.locale ?? config.DEFAULT_LOCALE,
    timeZone: contact?.timeZone ?? config.DEFAULT_TIME_ZONE,
    isFallback: decision?.fallback ?? false,
    decisionPerson: decision?.person ?? null,
    decisionRequest: decision?.request ?? null,
    decisionAt: decision?.at ?? null,
    traceId: intent.traceId ?? null,
    cancellationKey: intent.cancellationKey ?? null,
  }
}

/** A notification recorded without being sent: nothing rendered, nothing to dispatch. */
function unsent(
  base: BaseRow,
  status: 'opted-out',
  statusReason: string,
  errorCode: string | null,
  now: Date,
): NotificationRow {
  return {
    ...base,
    ...unrendered,
    status,
    statusReason,
    errorCode,
    unsubscribeUrl: null,
    scheduledAt: now.toISOString(),
    model: null,
  }
}

const unrendered = { subject: null, textBody: null, htmlBody: null, templateVersion: null }

function dedupe(recipients: readonly Recipient[]): Recipient[] {
  const seen = new Map<string, Recipient>()
  for (const recipient of recipients) if (!seen.has(recipient.userId)) seen.set(recipient.userId, recipient)
  return [...seen.values()]
}
