/**
 * `npm run docs:asyncapi`: writes docs/asyncapi.yaml, the AsyncAPI 3 document
 * of the registered event types (the same document the Worker serves at
 * /asyncapi.json). A test fails when the committed file is stale.
 */
import { writeFileSync } from 'node:fs'
import { stringify } from 'yaml'
import { asyncApiDocument } from '../src/events/asyncapi.ts'

/** The document as YAML, with a header saying where it comes from. */
export function asyncApiYaml(): string {
  return `# Generated from src/events by npm run docs:asyncapi; edit the event-type modules, not this file.\n${stringify(asyncApiDocument(), { lineWidth: 0 })}`
}

if (import.meta.main) {
  writeFileSync('docs/asyncapi.yaml', asyncApiYaml())
  console.log('written docs/asyncapi.yaml')
}
