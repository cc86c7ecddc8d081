/**
 * The bridge's defaults against the event registry: a bridge started without
 * KAFKA_TOPICS or RABBITMQ_ROUTING_KEYS consumes every topic and routing key
 * an event type the Worker handles is published on.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { eventTypes } from '../../src/events/registry.ts'
import { parseConfig } from '../src/config.ts'

const defaults = parseConfig({})

test('the default KAFKA_TOPICS holds every topic an event type comes on, the contacts topic included', () => {
  const topics = new Set(eventTypes().flatMap((type) => (type.channels.kafka ? [type.channels.kafka.topic] : [])))
  assert.ok(topics.has('pin.identity.contacts.v1'), 'contact-upserted is published on pin.identity.contacts.v1')
  assert.deepEqual(
    [...topics].filter((topic) => !defaults.KAFKA_TOPICS.includes(topic)),
    [],
  )
})

test('the default RabbitMQ exchange and routing keys are those the ArtHunt event types are published with', () => {
  const channels = eventTypes().flatMap((type) => (type.channels.rabbitmq ? [type.channels.rabbitmq] : []))
  assert.ok(channels.length > 0)
  for (const { exchange, routingKey } of channels) {
    assert.equal(exchange, defaults.RABBITMQ_EXCHANGE)
    assert.ok(defaults.RABBITMQ_ROUTING_KEYS.includes(routingKey), `${routingKey} is not bound by default`)
  }
})
