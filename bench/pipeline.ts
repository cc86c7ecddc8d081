/**
 * The Worker pipeline as the benches drive it: the events they ingest, the
 * Worker's ingest and its count of emails sent, and the rate between the two.
 */
import { INGEST_MAX_EVENTS, type InboundEvent } from '@notify-edge/contracts'
import { waitFor } from '../support/wait.ts'
import { rate } from './lib.ts'

/** The ingest and admin tokens of every Worker a bench starts. */
export const BENCH_TOKENS = { ingest: 'bench-ingest-token-0123456789', admin: 'bench-admin-token-0123456789' }

/** The same tokens as the Worker's variables (INGEST_TOKEN, ADMIN_TOKEN), for `startLocalWorker`. */
export const BENCH_TOKEN_VARIABLES = { INGEST_TOKEN: BENCH_TOKENS.ingest, ADMIN_TOKEN: BENCH_TOKENS.admin }

/** One bench event: its id, and the inbound record `POST /v1/ingest` takes. */
export type BenchEvent = { eventId: string; inbound: InboundEvent }

/** An event of `eventType` with `data`, as the HTTP ingest takes it, with a fresh id. */
function inboundEvent(eventType: string, data: Record<string, unknown>): BenchEvent {
  const eventId = crypto.randomUUID()
  const sample = {
    envelope: { eventId, eventType, schemaVersion: 1, occurredAt: new Date().toISOString(), producer: 'bench' },
    data,
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

/**
 * An `invitation.created` event for a fresh recipient: every one materializes
 * one email, sent at once. The benches measure one email per event, sent at
 * once, and compare it across runs. Until digests they sent `response.created`,
 * but `ResponseCreated` is now told in a digest by default (its first event to
 * an owner becomes a digest of one, closed by a delayed message: two more
 * dispatch hops), and an owner who chose it instant is throttled (four
 * statements where there was one insert). `InvitationCreated` has neither: an
 * optional kind (an unsubscribe link, the opt-out gate) on the path the old
 * `response.created` took, one insert and one send — so the counts stay
 * comparable with the runs before digests (docs/benchmarks.md).
 */
export function benchEvent(): BenchEvent {
  return inboundEvent('invitation.created', {
    invitationId: crypto.randomUUID(),
    projectId: crypto.randomUUID(),
    projectTitle: 'Бенчмарк',
    recipient: { userId: crypto.randomUUID(), email: 'bench@example.com', displayName: 'Bench' },
    actor: { userId: crypto.randomUUID(), displayName: 'Actor' },
    message: 'Бенчмарк',
    deepLink: 'https://arthunt.ru/x',
  })
}

/**
 * A `response.created` event to the project owner `ownerId`: told in the
 * owner's digest (its default), which the owner's next responses join until
 * it closes (bench/digest.ts).
 */
export function responseEvent(ownerId: string): BenchEvent {
  return inboundEvent('response.created', {
    responseId: crypto.randomUUID(),
    projectId: crypto.randomUUID(),
    projectTitle: 'Бенчмарк',
    recipient: { userId: ownerId, email: 'bench@example.com', displayName: 'Bench' },
    actor: { userId: crypto.randomUUID(), displayName: 'Actor' },
    proposedPrice: 45000,
    deepLink: 'https://arthunt.ru/x',
  })
}

/** A Worker under test, as a bench drives it. */
export type Pipeline = {
  /** `POST /v1/ingest` of these events (at most INGEST_MAX_EVENTS); resolves with the answer's text. */
  post: (events: InboundEvent[]) => Promise<string>
  /** Emails the Worker counts as sent: `notify_notifications_total{status="sent"}` of its /metrics. */
  sentCount: () => Promise<number>
  /** The sum of a counter of its /metrics over every label but `status` (`notify_digests_total`, "sent"). */
  counted: (metric: string, status: string) => Promise<number>
}

/** The pipeline of the Worker at `url`, with its ingest and admin tokens. */
export function pipelineAt(url: string, tokens: { ingest: string; admin: string }): Pipeline {
  const counted = async (metric: string, status: string) => {
    const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${tokens.admin}` } })).text()
    const line = new RegExp(`^${metric}\\{[^}]*status="${status}"[^}]*\\} (\\d+)$`, 'gm')
    return [...text.matchAll(line)].reduce((sum, match) => sum + Number(match[1]), 0)
  }
  return {
    post: (events) =>
      fetch(`${url}/v1/ingest`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.ingest}`, 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
      }).then((r) => r.text()),
    sentCount: () => counted('notify_notifications_total', 'sent'),
    counted,
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
