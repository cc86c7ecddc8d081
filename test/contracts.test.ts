import { describe, expect, it } from 'vitest'
import { type Decoded, decodeInbound } from '../src/events/decode-inbound.ts'
import { example, examples, freshInbound, inbound } from './helpers.ts'

function decodeExample(
  name: string,
  mutate?: (value: Record<string, unknown>) => void,
  headers?: (h: Record<string, string>) => void,
): Decoded {
  const sample = example(name)
  mutate?.(sample.value)
  headers?.(sample.headers)
  return decodeInbound(inbound(sample.value, sample.headers))
}

function expectInvalid(decoded: Decoded, field: string) {
  expect(decoded.status).toBe('invalid')
  if (decoded.status !== 'invalid') return
  expect(decoded.code).toBe('NTF_INVALID_PAYLOAD')
  expect(decoded.issues.map((issue) => issue.field)).toContain(field)
  expect(decoded.message).toContain(field)
}

/** Required fields per sample, as the seeds' tables say (dotted paths; `headers.` for record headers). */
const REQUIRED: Record<string, string[]> = {
  'response.created': [
    'envelope',
    'data',
    'envelope.eventId',
    'envelope.eventType',
    'envelope.schemaVersion',
    'envelope.occurredAt',
    'envelope.producer',
    'data.responseId',
    'data.projectId',
    'data.projectTitle',
    'data.recipient',
    'data.recipient.userId',
    'data.recipient.email',
    'data.recipient.displayName',
    'data.actor',
    'data.actor.userId',
    'data.actor.displayName',
    'data.deepLink',
  ],
  'invitation.created': [
    'envelope',
    'data',
    'envelope.eventId',
    'envelope.eventType',
    'envelope.schemaVersion',
    'envelope.occurredAt',
    'envelope.producer',
    'data.invitationId',
    'data.recipient',
    'data.recipient.userId',
    'data.recipient.email',
    'data.recipient.displayName',
    'data.actor',
    'data.actor.userId',
    'data.actor.displayName',
    'data.deepLink',
  ],
  // Not of the seeds: the cancellation of an invitation (an ArtHunt event of ours, in their envelope).
  'invitation.withdrawn': [
    'envelope',
    'data',
    'envelope.eventId',
    'envelope.eventType',
    'envelope.schemaVersion',
    'envelope.occurredAt',
    'envelope.producer',
    'data.invitationId',
  ],
  'verification-request-submitted': ['headers.message-id', 'headers.event-type', 'RequestId', 'PersonId', 'UserId'],
  'verification-completed': ['headers.message-id', 'headers.event-type', 'RequestId', 'PersonId', 'UserId', 'Decision'],
  'person-upserted': ['headers.message-id', 'headers.event-type', 'PersonId', 'UserId'],
  'contact-upserted': ['headers.message-id', 'headers.event-type', 'UserId', 'Email', 'Version'],
}

/** Optional fields per sample: absent (and null) is still valid. */
const OPTIONAL: Record<string, string[]> = {
  'response.created': ['envelope.traceId', 'data.proposedPrice', 'data.proposedCurrency', 'data.proposedDeadlineDays'],
  'invitation.created': ['envelope.traceId', 'data.projectId', 'data.projectTitle', 'data.message'],
  'invitation.withdrawn': ['envelope.traceId', 'data.actor'],
  'verification-request-submitted': [
    'ReviewerUserId',
    'headers.created-at',
    'headers.contract-version',
    'headers.aggregate-id',
  ],
  'verification-completed': ['Reason'],
  'person-upserted': ['VerificationStatus', 'PreviousVerificationStatus', 'VerificationRequestId'],
  'contact-upserted': ['Locale', 'TimeZone', 'DisplayName'],
}

/** Deletes (or sets) a dotted path in the sample; `headers.x` targets the record headers. */
function edit(name: string, path: string, value?: unknown): Decoded {
  const sample = example(name)
  const [target, keys] = path.startsWith('headers.')
    ? [sample.headers as Record<string, unknown>, [path.slice('headers.'.length)]]
    : [sample.value, path.split('.')]
  let node = target
  for (const key of keys.slice(0, -1)) node = node[key] as Record<string, unknown>
  const last = keys.at(-1) as string
  if (value === undefined) delete node[last]
  else node[last] = value
  return decodeInbound(inbound(sample.value, sample.headers))
}

describe('contracts', () => {
  it('has one sample per event type (the seeds’, and invitation.withdrawn), and every sample validates', () => {
    expect(
      examples()
        .map((sample) => sample.name)
        .sort(),
    ).toEqual(Object.keys(REQUIRED).sort())
    for (const sample of examples()) {
      const decoded = decodeInbound(inbound(sample.value, sample.headers))
      expect(decoded, sample.name).toMatchObject({
        status: 'valid',
        event: { eventType: sample.contract === 'arthunt' ? sample.name : sample.headers['event-type'] },
      })
    }
  })

  it('keys idempotency as the seeds say', () => {
    const arthunt = decodeExample('response.created')
    expect(arthunt.status === 'valid' && arthunt.event.idempotencyKey).toBe(
      'arthunt:response.created:7f1a0c62-5b1b-4d1a-9f1c-44cf2df5a111',
    )
    const pin = decodeExample('verification-completed')
    expect(pin.status === 'valid' && pin.event.idempotencyKey).toBe(
      'notifications-profile:verification-completed:b2e1d7c3-7c2d-4d66-9a5f-3e0c8d4b2f02',
    )
  })

  for (const [name, fields] of Object.entries(REQUIRED)) {
    for (const field of fields) {
      it(`${name}: without ${field} → NTF_INVALID_PAYLOAD naming it`, () => {
        const decoded = edit(name, field)
        if (field === 'headers.event-type' || field === 'envelope') {
          // Without the field that picks the contract, the shape itself is unknown.
          expect(decoded.status).toBe('invalid')
          if (decoded.status === 'invalid') expect(decoded.issues[0]?.field).toMatch(/^(body|envelope)/)
          return
        }
        expectInvalid(decoded, field)
      })
    }
  }

  for (const [name, fields] of Object.entries(OPTIONAL)) {
    it(`${name}: optional fields absent or null → valid`, () => {
      for (const field of fields) {
        expect(edit(name, field).status, `${field} absent`).toBe('valid')
        if (!field.startsWith('headers.')) expect(edit(name, field, null).status, `${field} null`).toBe('valid')
      }
    })
  }

  it('rejects a wrong uuid, date, enum, over-long message, bad link, empty GUID', () => {
    expectInvalid(edit('response.created', 'envelope.eventId', 'not-a-uuid'), 'envelope.eventId')
    expectInvalid(edit('response.created', 'data.projectId', '1b64a0f4-0a1c-4d4e-8f90'), 'data.projectId')
    expectInvalid(edit('response.created', 'envelope.occurredAt', '15.07.2026 10:21'), 'envelope.occurredAt')
    expectInvalid(edit('verification-completed', 'headers.created-at', 'yesterday'), 'headers.created-at')
    expectInvalid(edit('response.created', 'data.proposedCurrency', 'USD'), 'data.proposedCurrency')
    expectInvalid(edit('invitation.created', 'data.message', 'я'.repeat(2001)), 'data.message')
    expect(edit('invitation.created', 'data.message', 'я'.repeat(2000)).status).toBe('valid')
    expectInvalid(edit('invitation.created', 'data.deepLink', 'javascript:alert(1)'), 'data.deepLink')
    expectInvalid(edit('response.created', 'data.recipient.email', 'anna-at-example.com'), 'data.recipient.email')
    expectInvalid(edit('response.created', 'data.proposedPrice', 45000.5), 'data.proposedPrice')
    expectInvalid(edit('response.created', 'data.proposedPrice', '45000'), 'data.proposedPrice')
    expectInvalid(edit('verification-completed', 'UserId', '00000000-0000-0000-0000-000000000000'), 'UserId')
    expectInvalid(edit('contact-upserted', 'TimeZone', 'Mars/Olympus'), 'TimeZone')
  })

  it('accepts a newer schema or contract version with a warning (warn-and-proceed)', () => {
    const arthunt = edit('response.created', 'envelope.schemaVersion', 2)
    expect(arthunt.status === 'valid' && arthunt.event.warnings).toEqual([expect.stringContaining('schemaVersion 2')])
    const pin = edit('verification-completed', 'headers.contract-version', '2')
    expect(pin.status === 'valid' && pin.event.warnings).toEqual([expect.stringContaining('contract-version "2"')])
  })

  it('ignores event types it does not handle, and keeps unknown Decision values for the mapper', () => {
    expect(edit('response.created', 'envelope.eventType', 'project.archived')).toMatchObject({ status: 'ignored' })
    expect(edit('person-upserted', 'headers.event-type', 'person-deleted')).toMatchObject({ status: 'ignored' })
    expect(edit('verification-completed', 'Decision', 'escalated')).toMatchObject({ status: 'valid' })
  })

  it('picks the contract by shape, whatever the source', () => {
    const sample = example('verification-completed')
    for (const source of ['postgres', 'rabbitmq', 'kafka', 'http'] as const) {
      expect(decodeInbound(inbound(sample.value, sample.headers, { source })).status).toBe('valid')
    }
    expect(decodeInbound(inbound({ hello: 'world' }))).toMatchObject({ status: 'invalid', issues: [{ field: 'body' }] })
  })

  it('reads base64 bodies, and names the body when it is not UTF-8 or not JSON', () => {
    const event = freshInbound('response.created')
    const utf8 = new TextEncoder().encode(event.body)
    const base64 = btoa(String.fromCharCode(...utf8))
    expect(decodeInbound({ ...event, body: base64, encoding: 'base64' }).status).toBe('valid')
    const latin1 = btoa('\xff\xfe{"envelope"}')
    expect(decodeInbound({ ...event, body: latin1, encoding: 'base64' })).toMatchObject({
      status: 'invalid',
      code: 'NTF_INVALID_PAYLOAD',
      issues: [{ field: 'body', message: expect.stringContaining('not UTF-8') }],
    })
    expect(decodeInbound({ ...event, body: '{"envelope": ' })).toMatchObject({
      status: 'invalid',
      issues: [{ field: 'body', message: expect.stringContaining('not JSON') }],
    })
  })

  it('reads a body that starts with a byte-order mark, as text or as base64 (the bridge keeps the mark)', () => {
    const event = freshInbound('response.created')
    expect(decodeInbound({ ...event, body: `\ufeff${event.body}` }).status).toBe('valid')
    const bytes = new TextEncoder().encode(`\ufeff${event.body}`)
    const base64 = btoa(String.fromCharCode(...bytes))
    expect(decodeInbound({ ...event, body: base64, encoding: 'base64' }).status).toBe('valid')
  })

  it('turns a marker into its own dead-letter code', () => {
    const marker = {
      notifyEdgeMarker: 'payload-too-large',
      size: 300_000,
      sha256: 'a'.repeat(64),
      head: '{"envelope":',
    }
    expect(decodeInbound(inbound(marker))).toMatchObject({ status: 'invalid', code: 'NTF_PAYLOAD_TOO_LARGE' })
    const rejected = { ...marker, notifyEdgeMarker: 'rejected-by-ingest', reason: 'events[0].receivedAt: Invalid' }
    expect(decodeInbound(inbound(rejected))).toMatchObject({ status: 'invalid', code: 'NTF_INGEST_REJECTED' })
  })
})
