/**
 * The Worker pipeline as the benches drive it: the events they ingest, the
 * Worker's ingest and its count of emails sent, and the rate between the two.
 */
import { INGEST_MAX_EVENTS, type InboundEvent } from '@notify-edge/contracts'
import { waitFor } from '../support/wait.ts'
import { rate } from './lib.ts'

/** The ingest and admin tokens of every Worker a bench starts. */
export const BENCH_TOKENS = { ingest: 'bench-ingest-token-0123456789', admin: 'bench-admin-token-0123456789' }

/** One bench event: its id, and the inbound record `POST /v1/ingest` takes. */
export type BenchEvent = { eventId: string; inbound: InboundEvent }

/** A `response.created` event for one recipient, with fresh ids: every one materializes one email. */
export function benchEvent(): BenchEvent {
  const eventId = crypto.randomUUID()
  const sample = {
    envelope: {
      eventId,
      eventType: 'response.created',
      schemaVersion: 1,
      occurredAt: new Date().toISOString(),
      producer: 'bench',
    },
    data: {
      responseId: crypto.randomUUID(),
      projectId: crypto.randomUUID(),
      projectTitle: 'Бенчмарк',
      recipient: { userId: crypto.randomUUID(), email: 'bench@example.com', displayName: 'Bench' },
      actor: { userId: crypto.randomUUID(), displayName: 'Actor' },
      proposedPrice: 45000,
      deepLink: 'https://arthunt.ru/x',
    },
  }
  return {
    eventId,
    inbound: {
      source: 'http',
      origin: 'bench',
      sourceMessageId: eventId,
      receivedAt: new Date().toISOString(),
      headers: {},
      body: JSON.stringify(sample),
    },
  }
}

/** A Worker under test, as a bench drives it. */
export type Pipeline = {
  /** `POST /v1/ingest` of these events (at most INGEST_MAX_EVENTS); resolves with the answer's text. */
  post: (events: InboundEvent[]) => Promise<string>
  /** Emails the Worker counts as sent: `notify_notifications_total{status="sent"}` of its /metrics. */
  sentCount: () => Promise<number>
}

/** The pipeline of the Worker at `url`, with its ingest and admin tokens. */
export function pipelineAt(url: string, tokens: { ingest: string; admin: string }): Pipeline {
  return {
    post: (events) =>
      fetch(`${url}/v1/ingest`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.ingest}`, 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
      }).then((r) => r.text()),
    async sentCount() {
      const text = await (
        await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${tokens.admin}` } })
      ).text()
      return [...text.matchAll(/^notify_notifications_total\{[^}]*status="sent"\} (\d+)$/gm)].reduce(
        (sum, match) => sum + Number(match[1]),
        0,
      )
    },
  }
}

/**
 * Ingests `events`, as many a request as the ingest takes, and resolves with
 * emails/s from the first request until every one is counted sent. `posting`
 * sees each request's events just before it goes (to time them one by one).
 */
export async function ingestRate(
  worker: Pipeline,
  events: readonly BenchEvent[],
  posting: (events: readonly BenchEvent[]) => void = () => {},
): Promise<number> {
  const baseline = await worker.sentCount()
  const start = performance.now()
  for (let sent = 0; sent < events.length; sent += INGEST_MAX_EVENTS) {
    const chunk = events.slice(sent, sent + INGEST_MAX_EVENTS)
    posting(chunk)
    await worker.post(chunk.map((item) => item.inbound))
  }
  await waitFor(
    async () => ((await worker.sentCount()) >= baseline + events.length ? true : undefined),
    'all emails',
    600_000,
  )
  return rate(events.length, performance.now() - start)
}
