/**
 * The AsyncAPI 3 document made from the event registry: it parses with the
 * AsyncAPI parser without an error diagnostic, it describes every registered
 * event type, and docs/asyncapi.yaml is not stale.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { DiagnosticSeverity, Parser } from '@asyncapi/parser'
import { asyncApiYaml } from '../../scripts/asyncapi.ts'
import { eventTypes } from '../../src/events/registry.ts'

test('the AsyncAPI document parses with no error and describes every event type with its channel', async () => {
  const { document, diagnostics } = await new Parser().parse(asyncApiYaml())
  const errors = diagnostics.filter((diagnostic) => diagnostic.severity === DiagnosticSeverity.Error)
  assert.deepEqual(
    errors.map((error) => `${error.path.join('.')}: ${error.message}`),
    [],
  )
  assert.ok(document)
  const messages = document
    .allMessages()
    .all()
    .map((message) => message.name())
  assert.deepEqual(
    messages.sort(),
    eventTypes()
      .map((type) => type.type)
      .sort(),
  )
  const addresses = document
    .allChannels()
    .all()
    .map((channel) => channel.address())
  for (const type of eventTypes()) {
    for (const address of [type.channels.rabbitmq?.routingKey, type.channels.kafka?.topic]) {
      if (address) assert.ok(addresses.includes(address), `${type.type}: no channel ${address}`)
    }
  }
})

test('docs/asyncapi.yaml is what npm run docs:asyncapi writes today', () => {
  assert.equal(readFileSync('docs/asyncapi.yaml', 'utf8'), asyncApiYaml(), 'stale: run npm run docs:asyncapi')
})
