import { decodeInbound } from '../contracts/index.ts'
import type { EventTypeDefinition } from '../events/define.ts'
import { kinds } from '../events/registry.ts'

/** Greets the example recipient of an event that carries no name (PIN events read it from the replica). */
const EXAMPLE_NAME = 'Анна Клиент'

/**
 * The template model of a kind, made from its event type's example through
 * the real decoder and the type's own `intent`, so that a template is
 * rendered once with realistic data before it is saved or previewed.
 * Undefined for a kind nobody declares.
 */
export function exampleModelOf(kind: string): Record<string, unknown> | undefined {
  const entry = kinds().find((candidate) => candidate.kind.name === kind)
  return entry ? modelOf(entry.eventType) : undefined
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
