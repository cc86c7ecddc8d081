import {
  describeIssues,
  INBOUND_EVENT_MAX_BYTES,
  INGEST_MAX_BYTES,
  INGEST_MAX_EVENTS,
  type InboundEvent,
  InboundEventSchema,
  toFieldIssues,
} from '@notify-edge/contracts'
import type { Logger } from '../log.ts'
import type { Metrics } from '../metrics.ts'
import { backoffMs, retryAfterMs, sleep } from './backoff.ts'
import { type MarkerKind, markerFor } from './marker.ts'
import { classifyRefusal, type Refusal } from './refusal.ts'
import { wireForm, wireSafe } from './wire.ts'

/** Options of the sink. */
export type SinkOptions = {
  url: string
  token: string
  /** Requests in flight at once. @defaultValue 4 */
  concurrency: number
  /** Wait to fill a batch. @defaultValue 5 */
  lingerMs: number
  /** One request's timeout. @defaultValue 15000 */
  timeoutMs: number
}

/** How an event reached the Worker: as itself, or as a marker in its place (the original stays at its source). */
export type Delivery = { as: 'event' } | { as: 'marker'; marker: MarkerKind }

/** Options of one `send()`. */
export type SendOptions = {
  /** Where an original stays if a marker replaces it, when that is not its origin. */
  keptAt?: string
  /** Stops waiting: events not yet on their way are withdrawn, and `send()` rejects with the signal's reason. */
  signal?: AbortSignal
}

type Item = {
  /** What goes on the wire: the event made wire-safe, or its marker. */
  event: InboundEvent
  /** `event` serialized (once: its size and the request body are both taken from it). */
  json: string
  original: InboundEvent
  keptAt: string | undefined
  size: number
  since: number
  delivery: Delivery
  /** A last-resort marker was sent; a refusal of it cannot be answered by another marker. */
  minimal: boolean
  resolve: (delivery: Delivery) => void
}

/** Bytes of `{"events":[` … `]}` around the events, with room to spare. */
const ENVELOPE_BYTES = 64

/**
 * Delivers events to the Worker's ingest route, batching what the sources
 * hand it (≤ 100 events / 256 KB, a short linger) with a bounded number of
 * requests in flight. `send()` resolves only once the Worker answered 202 for
 * every event, so a source acknowledges nothing earlier; it never rejects
 * (unless its caller withdraws) and never drops: failures are retried with
 * jittered exponential backoff (network errors, timeouts, 5xx, 429 with
 * Retry-After, 401/403, and a refusal of the request as a whole).
 *
 * No single event can stall it: every event is made wire-safe first (ids,
 * origin and headers bounded), one too large for a queue message travels as a
 * payload-too-large marker, and an event the route names in a 400/413 is
 * replaced by a rejected-by-ingest marker, which is built to pass (and, if
 * even that were refused, by a minimal one). `send()` tells the source which
 * events went as markers, so it keeps their originals.
 */
export class Sink {
  readonly #options: SinkOptions
  readonly #log: Logger
  readonly #metrics: Metrics
  readonly #pending: Item[] = []
  readonly #stop = new AbortController()
  #inFlight = 0
  #timer: NodeJS.Timeout | undefined
  #healthy = true
  #idle: (() => void)[] = []

  constructor(options: SinkOptions, log: Logger, metrics: Metrics) {
    this.#options = options
    this.#log = log.child({ component: 'sink' })
    this.#metrics = metrics
  }

  /** True unless the last request to the Worker failed. */
  get healthy(): boolean {
    return this.#healthy
  }

  /** Resolves once the Worker accepted every one of `events`, with how each went (in order). */
  send(events: readonly InboundEvent[], options: SendOptions = {}): Promise<Delivery[]> {
    const { signal, keptAt } = options
    if (signal?.aborted) return Promise.reject(signal.reason)
    const now = performance.now()
    const items: Item[] = []
    const accepted = events.map(
      (original) =>
        new Promise<Delivery>((resolve) => {
          const item = this.#prepare(original, keptAt, now, resolve)
          items.push(item)
          this.#pending.push(item)
        }),
    )
    this.#schedule()
    const all = Promise.all(accepted)
    if (!signal) return all
    return new Promise<Delivery[]>((resolve, reject) => {
      const withdraw = () => {
        // Events not on their way yet leave the queue; those in a request finish it, unheard.
        const ours = new Set(items)
        for (let index = this.#pending.length - 1; index >= 0; index -= 1) {
          if (ours.has(this.#pending[index] as Item)) this.#pending.splice(index, 1)
        }
        reject(signal.reason)
      }
      signal.addEventListener('abort', withdraw, { once: true })
      all.then((deliveries) => {
        signal.removeEventListener('abort', withdraw)
        resolve(deliveries)
      }, reject)
    })
  }

  /** Stops retrying: requests still failing end and their events stay at their sources. */
  abort(): void {
    this.#stop.abort()
  }

  /** Resolves when nothing is pending or in flight. */
  drained(): Promise<void> {
    if (this.#pending.length === 0 && this.#inFlight === 0) return Promise.resolve()
    return new Promise((resolve) => this.#idle.push(resolve))
  }

  /** The event as it will travel: wire-safe, or a marker when it cannot fit or would not pass the route's schema. */
  #prepare(original: InboundEvent, keptAt: string | undefined, since: number, resolve: Item['resolve']): Item {
    let event = wireSafe(original)
    let { json, size } = wireForm(event)
    let delivery: Delivery = { as: 'event' }
    if (size > INBOUND_EVENT_MAX_BYTES) {
      event = markerFor(original, 'payload-too-large', { keptAt })
      delivery = { as: 'marker', marker: 'payload-too-large' }
    } else {
      // The route's own schema, checked here: what it would refuse never leaves as it is.
      const checked = InboundEventSchema.safeParse(event)
      if (!checked.success) {
        const reason = `refused by the bridge before sending: ${describeIssues(toFieldIssues(checked.error))}`
        event = markerFor(original, 'rejected-by-ingest', { reason, keptAt })
        delivery = { as: 'marker', marker: 'rejected-by-ingest' }
      }
    }
    if (delivery.as === 'marker') {
      this.#metrics.markers.inc({ marker: delivery.marker })
      ;({ json, size } = wireForm(event))
    }
    return { event, json, original, keptAt, size, since, delivery, minimal: false, resolve }
  }

  #schedule(): void {
    // Summed here rather than kept as a running total: withdrawn and refused events change sizes in place.
    let bytes = 0
    for (let index = 0; index < this.#pending.length && index < INGEST_MAX_EVENTS; index += 1) {
      bytes += (this.#pending[index] as Item).size
    }
    if (this.#pending.length >= INGEST_MAX_EVENTS || bytes >= INGEST_MAX_BYTES - ENVELOPE_BYTES) {
      this.#pump()
    } else if (!this.#timer) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined
        this.#pump()
      }, this.#options.lingerMs)
    }
  }

  #pump(): void {
    while (this.#inFlight < this.#options.concurrency && this.#pending.length > 0) {
      const batch: Item[] = []
      let bytes = ENVELOPE_BYTES
      while (this.#pending.length > 0 && batch.length < INGEST_MAX_EVENTS) {
        const next = this.#pending[0] as Item
        if (batch.length > 0 && bytes + next.size + 1 > INGEST_MAX_BYTES) break
        batch.push(this.#pending.shift() as Item)
        bytes += next.size + 1
      }
      this.#inFlight += 1
      void this.#deliver(batch).finally(() => {
        this.#inFlight -= 1
        if (this.#pending.length > 0) this.#pump()
        else if (this.#inFlight === 0) for (const resolve of this.#idle.splice(0)) resolve()
      })
    }
  }

  async #deliver(batch: Item[]): Promise<void> {
    for (let attempt = 0; !this.#stop.signal.aborted; attempt += 1) {
      const outcome = await this.#post(batch)
      if (outcome.ok) {
        this.#healthy = true
        const now = performance.now()
        for (const item of batch) {
          this.#metrics.forwarded.inc({ source: item.event.source })
          this.#metrics.latency.observe({ source: item.event.source }, (now - item.since) / 1000)
          item.resolve(item.delivery)
        }
        return
      }
      this.#metrics.sinkErrors.inc({ status: outcome.status })
      if (outcome.refusal?.of === 'events' && this.#replaceRefused(batch, outcome.refusal.reasons)) {
        this.#log.warn('sink.events-refused', { status: outcome.status, replaced: outcome.refusal.reasons.size })
        continue
      }
      this.#healthy = false
      const wait = outcome.retryAfterMs ?? backoffMs(attempt)
      const fields = { status: outcome.status, attempt, waitMs: Math.round(wait), events: batch.length }
      if (outcome.status === '401' || outcome.status === '403') {
        this.#log.error('sink.unauthorized', { ...fields, hint: 'check SINK_TOKEN against the Worker INGEST_TOKEN' })
      } else if (outcome.refusal) {
        // Not attributable to one event: a proxy in the way, or a bug. Loud, and retried like an outage.
        this.#log.error('sink.request-refused', { ...fields, refusal: outcome.refusal })
      } else {
        this.#log.warn('sink.failed', { ...fields, error: outcome.error })
      }
      await sleep(wait, this.#stop.signal)
    }
  }

  /**
   * Replaces each event the route named by a marker (a marker refused in turn
   * by a minimal one). False when nothing could be replaced: every named event
   * was a minimal marker already, so the refusal is not about the events.
   */
  #replaceRefused(batch: Item[], reasons: ReadonlyMap<number, string>): boolean {
    let replaced = 0
    for (const [index, reason] of reasons) {
      const item = batch[index]
      if (!item || item.minimal) continue
      const minimal = item.delivery.as === 'marker' && item.delivery.marker === 'rejected-by-ingest'
      item.event = markerFor(item.original, 'rejected-by-ingest', { reason, keptAt: item.keptAt, minimal })
      ;({ json: item.json, size: item.size } = wireForm(item.event))
      item.minimal = minimal
      item.delivery = { as: 'marker', marker: 'rejected-by-ingest' }
      this.#metrics.markers.inc({ marker: 'rejected-by-ingest' })
      replaced += 1
    }
    return replaced > 0
  }

  async #post(batch: readonly Item[]): Promise<{
    ok: boolean
    status: string
    retryAfterMs?: number
    refusal?: Refusal
    error?: string
  }> {
    let response: Response
    try {
      response = await fetch(this.#options.url, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.#options.token}`, 'content-type': 'application/json' },
        // Byte for byte what JSON.stringify({ events }) gives, without serializing every event again.
        body: `{"events":[${batch.map((item) => item.json).join(',')}]}`,
        signal: AbortSignal.timeout(this.#options.timeoutMs),
      })
    } catch (error) {
      const timeout = (error as Error).name === 'TimeoutError'
      return { ok: false, status: timeout ? 'timeout' : 'network', error: (error as Error).message }
    }
    const text = await response.text().catch(() => '')
    if (response.status === 202) return { ok: true, status: '202' }
    const status = String(response.status)
    if (response.status === 400 || response.status === 413) {
      return { ok: false, status, refusal: classifyRefusal(text, batch.length) }
    }
    return {
      ok: false,
      status,
      retryAfterMs: retryAfterMs(response.headers.get('retry-after')),
      error: text.slice(0, 300),
    }
  }
}
