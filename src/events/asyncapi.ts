import { z } from 'zod'
import { ArtHuntEnvelopeSchema } from '../contracts/arthunt.ts'
import { PinHeadersSchema } from '../contracts/pin.ts'
import type { EventTypeDefinition } from './define.ts'
import { eventTypes } from './registry.ts'

type Json = Record<string, unknown>

/** A zod schema as the JSON Schema (draft 7) an AsyncAPI message carries. */
function jsonSchema(schema: z.ZodType): Json {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-7',
    io: 'input',
    unrepresentable: 'any',
  }) as Json
  return rest
}

/** `notifications.email.response.created` → `notificationsEmailResponseCreated`: a key AsyncAPI accepts. */
function keyOf(text: string): string {
  return text
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((part, index) => (index === 0 ? part : part[0]?.toUpperCase() + part.slice(1)))
    .join('')
}

type Channel = { address: string; messages: Set<string>; bindings: Json; servers: string[] }

function channelsOf(types: readonly EventTypeDefinition[]): Map<string, Channel> {
  const channels = new Map<string, Channel>()
  const add = (key: string, make: () => Omit<Channel, 'messages'>, message: string) => {
    const channel = channels.get(key) ?? { ...make(), messages: new Set<string>() }
    channel.messages.add(message)
    channels.set(key, channel)
  }
  for (const type of types) {
    const { rabbitmq, kafka, outbox } = type.channels
    if (rabbitmq) {
      add(
        keyOf(rabbitmq.routingKey),
        () => ({
          address: rabbitmq.routingKey,
          servers: ['rabbitmq'],
          bindings: { amqp: { is: 'routingKey', exchange: { name: rabbitmq.exchange, type: 'topic', durable: true } } },
        }),
        keyOf(type.type),
      )
    }
    if (kafka) {
      add(
        keyOf(kafka.topic),
        () => ({ address: kafka.topic, servers: ['kafka'], bindings: { kafka: { topic: kafka.topic } } }),
        keyOf(type.type),
      )
    }
    if (outbox) {
      add(
        'outbox',
        () => ({ address: 'data_exchange.message_queue_log', servers: ['outbox'], bindings: {} }),
        keyOf(type.type),
      )
    }
  }
  return channels
}

function messageOf(type: EventTypeDefinition): Json {
  const arthunt = type.family === 'arthunt'
  const payload = arthunt
    ? jsonSchema(z.object({ envelope: ArtHuntEnvelopeSchema, data: type.schema }))
    : jsonSchema(type.schema)
  const kinds = type.kinds.map((kind) => `${kind.name} (${kind.summary})`).join('; ')
  return {
    name: type.type,
    title: type.type,
    summary: type.summary,
    description: kinds ? `Makes: ${kinds}.` : 'Makes no notification of its own.',
    contentType: 'application/json',
    payload,
    ...(arthunt ? {} : { headers: jsonSchema(PinHeadersSchema) }),
    examples: [
      {
        name: 'example',
        payload: type.example.body,
        ...(type.example.headers ? { headers: type.example.headers } : {}),
      },
    ],
  }
}

/**
 * The AsyncAPI 3 document of the events this Worker consumes, made from the
 * registry: a channel per RabbitMQ routing key, Kafka topic and the outbox,
 * a message per event type with its payload and header schemas (from zod) and
 * its example, and an operation receiving each channel. Served at
 * `GET /asyncapi.json`; `npm run docs:asyncapi` writes docs/asyncapi.yaml.
 */
export function asyncApiDocument(): Json {
  const types = eventTypes()
  const channels = channelsOf(types)
  return {
    asyncapi: '3.1.0',
    info: {
      title: 'notify-edge events',
      version: '0.1.0',
      description:
        'The domain events notify-edge turns into emails, where producers publish them, and what each one carries. Any event can also be written to the PostgreSQL outbox.',
    },
    defaultContentType: 'application/json',
    servers: {
      rabbitmq: { host: 'localhost:5672', protocol: 'amqp', description: 'exchange arthunt.notifications (topic)' },
      kafka: { host: 'localhost:9092', protocol: 'kafka', description: 'consumer group notifications-profile-events' },
      outbox: {
        host: 'localhost:5432',
        protocol: 'postgresql',
        description: 'transactional outbox, data_exchange schema',
      },
    },
    channels: Object.fromEntries(
      [...channels].map(([key, channel]) => [
        key,
        {
          address: channel.address,
          servers: channel.servers.map((server) => ({ $ref: `#/servers/${server}` })),
          messages: Object.fromEntries(
            [...channel.messages].map((message) => [message, { $ref: `#/components/messages/${message}` }]),
          ),
          ...(Object.keys(channel.bindings).length > 0 ? { bindings: channel.bindings } : {}),
        },
      ]),
    ),
    operations: Object.fromEntries(
      [...channels].map(([key, channel]) => [
        `receive${key[0]?.toUpperCase()}${key.slice(1)}`,
        {
          action: 'receive',
          channel: { $ref: `#/channels/${key}` },
          messages: [...channel.messages].map((message) => ({ $ref: `#/channels/${key}/messages/${message}` })),
        },
      ]),
    ),
    components: { messages: Object.fromEntries(types.map((type) => [keyOf(type.type), messageOf(type)])) },
  }
}
