import { decodeInbound } from '../events/decode-inbound.ts'
import type { EventTypeDefinition } from '../events/define.ts'
import { DIGEST_TEMPLATE_SUFFIX, kinds } from '../events/registry.ts'

/** Greets the example recipient of an event that carries no name (PIN events read it from the replica). */
const EXAMPLE_NAME = 'Анна Клиент'

/**
 * The template model of a kind, made from its event type's example through
 * the real decoder and the type's own `intent`, so that a template is
 * rendered once with realistic data before it is saved or previewed.
 * Undefined for a kind nobody declares.
 */
export function exampleModelOf(kind: string): Record<string, unknown> | undefined {
  if (kind.endsWith(DIGEST_TEMPLATE_SUFFIX)) return digestExampleOf(kind.slice(0, -DIGEST_TEMPLATE_SUFFIX.length))
  const entry = entryOf(kind)
  return entry ? modelOf(entry.eventType) : undefined
}

/** The registry's entry of a kind: the kind and the event type that declares it. */
function entryOf(kind: string) {
  return kinds().find((candidate) => candidate.kind.name === kind)
}

/** Notifications in a digest's example. */
const DIGEST_EXAMPLE_ITEMS = 5

/**
 * A digest's model from its kind's example: `items` — the example's model
 * five times (its values are data the kind's templates were checked with; a
 * changed copy could break them, a currency code for one) — `count`, and the
 * recipient's name, as a digest is rendered.
 */
function digestExampleOf(kind: string): Record<string, unknown> | undefined {
  const entry = entryOf(kind)
  if (!entry?.kind.digestTemplates) return undefined
  const { recipientName, ...model } = modelOf(entry.eventType)
  const items = Array.from({ length: DIGEST_EXAMPLE_ITEMS }, () => ({ ...model }))
  return { items, count: items.length, recipientName }
}

function modelOf(eventType: EventTypeDefinition): Record<string, unknown> {
  const { body, headers = {} } = eventType.example
  const decoded = decodeInbound({
    source: 'http',
    origin: 'examples',
    sourceMessageId: 'example',
    receivedAt: new Date(0).toISOString(),
    headers,
    body: JSON.stringify(body),
  })
  if (decoded.status !== 'valid') throw new Error(`the example of ${eventType.type} does not validate`)
  const intent = eventType.intent(decoded.event)
  if (intent.type !== 'notify') throw new Error(`the example of ${eventType.type} does not notify`)
  const recipient = intent.recipients === 'reviewer-pool' ? undefined : intent.recipients[0]
  return { ...intent.model, recipientName: recipient?.inline?.displayName ?? EXAMPLE_NAME }
}
