import { exports } from 'cloudflare:workers'
import type { InboundEvent } from '../src/contracts/index.ts'

export const INGEST_TOKEN = 'test-ingest-token-0123456789'
export const ADMIN_TOKEN = 'test-admin-token-0123456789'

/** A sample of examples/: ArtHunt samples are bodies; PIN samples are Kafka records. */
export type Example = {
  name: string
  contract: 'arthunt' | 'pin'
  /** The payload as a JSON value. */
  value: Record<string, unknown>
  headers: Record<string, string>
}

const arthunt = import.meta.glob<Record<string, unknown>>('../examples/arthunt/*.json', {
  eager: true,
  import: 'default',
})
const pin = import.meta.glob<{ headers: Record<string, string>; value: Record<string, unknown> }>(
  '../examples/pin/*.json',
  { eager: true, import: 'default' },
)

/** Every sample in examples/ (deep copies: tests may mutate them). */
export function examples(): Example[] {
  const name = (path: string) => path.replace(/^.*\//, '').replace(/\.json$/, '')
  return [
    ...Object.entries(arthunt).map(
      ([path, value]): Example => ({
        name: name(path),
        contract: 'arthunt',
        value: structuredClone(value),
        headers: {},
      }),
    ),
    ...Object.entries(pin).map(
      ([path, record]): Example => ({
        name: name(path),
        contract: 'pin',
        value: structuredClone(record.value),
        headers: { ...record.headers },
      }),
    ),
  ]
}

/** One sample by file name, e.g. `response.created` or `verification-completed`. */
export function example(name: string): Example {
  const found = examples().find((candidate) => candidate.name === name)
  if (!found) throw new Error(`no example ${name}`)
  return found
}

let counter = 0

/** A fresh random GUID (v4). */
export function guid(): string {
  return crypto.randomUUID()
}

/** Wraps a payload as the bridge would: an InboundEvent with a unique sourceMessageId. */
export function inbound(
  value: unknown,
  headers: Record<string, string> = {},
  overrides: Partial<InboundEvent> = {},
): InboundEvent {
  counter += 1
  return {
    source: 'http',
    origin: `test:${counter}`,
    sourceMessageId: `test-${guid()}`,
    receivedAt: new Date().toISOString(),
    headers,
    body: JSON.stringify(value),
    ...overrides,
  }
}

/** A sample as an InboundEvent, with fresh ids so each test's event is its own. */
export function freshInbound(name: string, mutate?: (value: Record<string, unknown>) => void): InboundEvent {
  const sample = example(name)
  const id = guid()
  if (sample.contract === 'arthunt') (sample.value.envelope as Record<string, unknown>).eventId = id
  else sample.headers['message-id'] = id
  mutate?.(sample.value)
  return inbound(sample.value, sample.headers)
}

/** `POST /v1/ingest` through the Worker's own fetch handler. */
export function postIngest(body: unknown, token: string | null = INGEST_TOKEN): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (token !== null) headers.authorization = `Bearer ${token}`
  return exports.default.fetch('http://worker/v1/ingest', {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
}
