import { contactUpserted } from './contact-upserted.ts'
import type { EventTypeDefinition, Family, KindDefinition } from './define.ts'
import { invitationCreated } from './invitation-created.ts'
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
  verificationRequestSubmitted,
  verificationCompleted,
  personUpserted,
  contactUpserted,
]

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
  }
  registered.push(added)
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

/** The names of every kind. */
export function kindNames(): string[] {
  return kinds().map((entry) => entry.kind.name)
}

/** The kind an event type makes when it makes exactly one (a decision's depends on its payload). */
export function onlyKindOf(type: string): string | undefined {
  const definition = registered.find((candidate) => candidate.type === type)
  return definition?.kinds.length === 1 ? definition.kinds[0]?.name : undefined
}
