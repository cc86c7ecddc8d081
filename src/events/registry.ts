import { CLOCK_PATTERN } from '../contracts/fields.ts'
import { contactUpserted } from './contact-upserted.ts'
import type {
  DeliveryMode,
  DeliveryPolicy,
  EventTypeDefinition,
  Family,
  InAppTemplateParts,
  KindDefinition,
  TemplateParts,
} from './define.ts'
import { invitationCreated } from './invitation-created.ts'
import { invitationWithdrawn } from './invitation-withdrawn.ts'
import { personUpserted } from './person-upserted.ts'
import { responseCreated } from './response-created.ts'
import { verificationCompleted } from './verification-completed.ts'
import { verificationRequestSubmitted } from './verification-request-submitted.ts'

/**
 * The event types this Worker handles. Adding one is a module like those
 * above plus a line here (docs/adding-an-event-type.md); everything else —
 * decoding, planning, dead-letter kinds, template examples and defaults,
 * channel defaults, the AsyncAPI document — reads this list.
 */
const BUILT_IN: readonly EventTypeDefinition[] = [
  responseCreated,
  invitationCreated,
  invitationWithdrawn,
  verificationRequestSubmitted,
  verificationCompleted,
  personUpserted,
  contactUpserted,
]

/** Longest digest window, in minutes: a day (a longer wait is a daily digest). */
const MAX_DIGEST_WINDOW_MINUTES = 1440

/** The longest an email may wait for its in-app item: a day, well inside an item's retention. */
export const MAX_ESCALATION_MINUTES = 1440

const registered: EventTypeDefinition[] = []
// Through the same checks as a type added at run time: a duplicate fails at load.
for (const definition of BUILT_IN) registerEventType(definition)

/**
 * Registers one more event type at run time (an extension, or a test). Its
 * (family, type) and the names of its kinds must be new.
 */
export function registerEventType<T>(definition: EventTypeDefinition<T>): void {
  // Its intent takes its own payload type; the registry holds them all as `unknown`.
  const added = definition as unknown as EventTypeDefinition
  if (eventTypeOf(added.family, added.type))
    throw new Error(`event type ${added.family}/${added.type} is registered already`)
  for (const kind of added.kinds) {
    if (kindOf(kind.name)) throw new Error(`kind ${kind.name} is registered already`)
    const refused = deliveryRefusal(kind)
    if (refused) throw new Error(`kind ${kind.name}: ${refused}`)
  }
  registered.push(added)
}

/** Why a kind's delivery policy cannot be used, or undefined when it can. */
function deliveryRefusal(kind: KindDefinition): string | undefined {
  // A digest's templates are stored under `{kind}.digest`: a dot would make that key ambiguous.
  if (kind.name.includes('.')) return 'a kind name cannot contain "."'
  const refused = escalationRefusal(kind)
  if (refused) return refused
  for (const [channel, policy] of Object.entries(kind.delivery ?? {})) {
    if (!policy) continue
    if (kind.category === 'transactional' && (policy.digest || policy.throttle || policy.default !== 'instant'))
      return `a transactional kind always goes at once: no digest or throttle on ${channel}`
    if (policy.default === 'digest' && !policy.digest) return `${channel} defaults to a digest but has no schedule`
    if (policy.digest && Object.keys(kind.digestTemplates ?? {}).length === 0)
      return `${channel} has a digest but the kind has no digestTemplates`
    const schedule = policy.digest
    if (schedule && 'window' in schedule) {
      const { minutes } = schedule.window
      if (!Number.isInteger(minutes) || minutes < 1 || minutes > MAX_DIGEST_WINDOW_MINUTES)
        return `${channel}: a digest window is whole minutes from 1 to ${MAX_DIGEST_WINDOW_MINUTES}`
    }
    if (schedule && 'daily' in schedule && !CLOCK_PATTERN.test(schedule.daily.at))
      return `${channel}: a daily digest's time is HH:MM, 24-hour`
    const throttle = policy.throttle
    if (
      throttle &&
      !(
        Number.isInteger(throttle.max) &&
        throttle.max >= 1 &&
        Number.isInteger(throttle.windowMinutes) &&
        throttle.windowMinutes >= 1
      )
    )
      return `${channel}: a throttle is at least 1 email per at least 1 minute, in whole numbers`
  }
  return undefined
}

/** Why a kind's escalation cannot be used, or undefined when it can. */
function escalationRefusal(kind: KindDefinition): string | undefined {
  const { escalation } = kind
  if (!escalation) return undefined
  if (Object.keys(kind.inAppTemplates ?? {}).length === 0) return 'an escalation needs the in-app templates it waits on'
  const { afterMinutes, unless } = escalation
  if (!Number.isInteger(afterMinutes) || afterMinutes < 1 || afterMinutes > MAX_ESCALATION_MINUTES)
    return `an escalation waits whole minutes from 1 to ${MAX_ESCALATION_MINUTES}`
  if (unless !== 'seen' && unless !== 'read') return 'an escalation is spared by an item "seen" or "read"'
  return undefined
}

/** How `channel` of `kind` delivers: its declared policy, else instant. */
export function deliveryOf(kind: string, channel: string): DeliveryPolicy {
  return kindOf(kind)?.delivery?.[channel] ?? { default: 'instant' }
}

/** Whether quiet hours hold back a kind on a channel: by default email only, since an in-app item makes no sound. */
export function quietHoursHold(kind: string, channel: string): boolean {
  return deliveryOf(kind, channel).quietHours ?? channel !== 'in-app'
}

/**
 * How a notification of a kind reaches its recipient on a channel: the
 * recipient's own choice when the kind has a digest to choose, else the
 * kind's default; always instant for a kind without a digest.
 */
export function deliveryModeOf(kind: string, channel: string, chosen: DeliveryMode | undefined): DeliveryMode {
  const policy = deliveryOf(kind, channel)
  if (!policy.digest) return 'instant'
  return chosen ?? policy.default
}

/** Every registered event type. */
export function eventTypes(): readonly EventTypeDefinition[] {
  return registered
}

/** The event type of a family with this `eventType` / `event-type`. */
export function eventTypeOf(family: Family, type: string): EventTypeDefinition | undefined {
  return registered.find((definition) => definition.family === family && definition.type === type)
}

/** Every kind, once, with the event type that declares it. */
export function kinds(): { kind: KindDefinition; eventType: EventTypeDefinition }[] {
  return registered.flatMap((eventType) => eventType.kinds.map((kind) => ({ kind, eventType })))
}

/** A kind by name. */
export function kindOf(name: string): KindDefinition | undefined {
  return kinds().find((entry) => entry.kind.name === name)?.kind
}

/** The names of the kinds recipients may opt out of. */
export function optionalKindNames(): string[] {
  return kinds()
    .filter((entry) => entry.kind.category === 'optional')
    .map((entry) => entry.kind.name)
}

/** The names of the kinds with a digest on some channel. */
export function digestKindNames(): string[] {
  return kinds()
    .filter(({ kind }) => Object.values(kind.delivery ?? {}).some((policy) => policy?.digest))
    .map(({ kind }) => kind.name)
}

/** Every kind's throttle, by channel: its limit and its window in seconds. */
export function throttles(): { kind: string; channel: string; max: number; seconds: number }[] {
  return kinds().flatMap(({ kind }) =>
    Object.entries(kind.delivery ?? {}).flatMap(([channel, policy]) =>
      policy?.throttle
        ? [{ kind: kind.name, channel, max: policy.throttle.max, seconds: policy.throttle.windowMinutes * 60 }]
        : [],
    ),
  )
}

/** The names of every kind. */
export function kindNames(): string[] {
  return kinds().map((entry) => entry.kind.name)
}

/** The kind an event type makes when it makes exactly one (a decision's depends on its payload). */
export function onlyKindOf(type: string): string | undefined {
  const definition = registered.find((candidate) => candidate.type === type)
  return definition?.kinds.length === 1 ? definition.kinds[0]?.name : undefined
}

/** What a digest's templates are stored and edited under: `ResponseCreated.digest`. */
export const DIGEST_TEMPLATE_SUFFIX = '.digest'

/**
 * Every key templates are kept under, with its default templates by locale:
 * each kind's name, and `{name}.digest` for a kind that declares a digest.
 */
export function templateKeys(): {
  key: string
  templates: Record<string, TemplateParts>
  inApp?: Record<string, InAppTemplateParts>
}[] {
  return kinds().flatMap(({ kind }) => [
    { key: kind.name, templates: kind.templates, inApp: kind.inAppTemplates },
    ...(kind.digestTemplates
      ? [{ key: `${kind.name}${DIGEST_TEMPLATE_SUFFIX}`, templates: kind.digestTemplates }]
      : []),
  ])
}
