import { describe, expect, it } from 'vitest'
import operating from '../docs/operating.md?raw'
import responseCreated from '../examples/arthunt/response.created.json?raw'
import ingestSample from '../examples/ingest/response.created.json'
import ingestMissingEmail from '../examples/ingest/response.created.missing-email.json'
import { ERRORS } from '../src/errors.ts'

describe('docs and examples', () => {
  it('docs/operating.md lists every error code of src/errors.ts with its decision, and no other', () => {
    const rows = [
      ...operating.matchAll(/^\| `([A-Z_]+)`\s*\| (retry|dead-letter|fail|skip|wait|HTTP \d{3})\s*\|/gm),
    ].map((match) => [match[1], match[2]])
    const expected = Object.entries(ERRORS).map(([code, entry]) => [
      code,
      'decision' in entry ? entry.decision : `HTTP ${entry.status}`,
    ])
    expect(rows).toEqual(expected)
  })

  it("docs/getting-started.md's curl posts the response.created sample of examples/arthunt verbatim", () => {
    expect(ingestSample.events).toHaveLength(1)
    expect(ingestSample.events[0]?.body).toBe(responseCreated)
  })

  it('the missing-email request is that sample without recipient.email, and nothing else', () => {
    const body = JSON.parse(ingestMissingEmail.events[0]?.body as string)
    const sample = JSON.parse(responseCreated)
    delete sample.data.recipient.email
    expect(body).toEqual(sample)
  })
})
