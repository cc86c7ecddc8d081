import type { Logger } from 'pino'
import { INGEST_MAX_BYTES, INGEST_MAX_EVENTS, type InboundEvent } from '../../../src/contracts/index.ts'
import type { Metrics } from '../metrics.ts'
import { backoffMs, retryAfterMs, sleep } from './backoff.ts'
import { fitForQueue, markerFor, wireSize } from './marker.ts'

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

type Item = { event: InboundEvent; size: number; since: number; resolve: () => void }

/** Bytes of `{"events":[` … `]}` around the events, with room to spare. */
const ENVELOPE_BYTES = 64

/**
 * Delivers events to the Worker's ingest route (DESIGN §2), batching what the
 * sources hand it (≤ 100 events / 256 KB, a short linger) with a bounded
 * number of requests in flight. `send()` resolves only once the Worker
 * answered 202 for every event, so a source acknowledges nothing earlier; it
 * never rejects and never drops: failures are retried with jittered
 * exponential backoff (network errors, timeouts, 5xx, 429 with Retry-After,
 * and 401/403, which mean a configuration error). An event the route refuses
 * (400/413 naming it) is replaced by a marker that becomes a dead letter.
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

  /** Resolves once the Worker accepted every one of `events`. */
  send(events: readonly InboundEvent[]): Promise<void> {
    const now = performance.now()
    const accepted = events.map(
      (event) =>
        new Promise<void>((resolve) => {
          const fitted = fitForQueue(event)
          if (fitted !== event) this.#metrics.markers.inc({ marker: 'payload-too-large' })
          this.#pending.push({ event: fitted, size: wireSize(fitted), since: now, resolve })
        }),
    )
    this.#schedule()
    return Promise.all(accepted).then(() => undefined)
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

  #schedule(): void {
    const bytes = this.#pending.reduce((sum, item) => sum + item.size, 0)
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
      const outcome = await this.#post(batch.map((item) => item.event))
      if (outcome.ok) {
        this.#healthy = true
        const now = performance.now()
        for (const item of batch) {
          this.#metrics.forwarded.inc({ source: item.event.source })
          this.#metrics.latency.observe({ source: item.event.source }, (now - item.since) / 1000)
          item.resolve()
        }
        return
      }
      this.#metrics.sinkErrors.inc({ status: outcome.status })
      let replaced = 0
      for (const [index, reason] of outcome.refused ?? []) {
        // The route named an event it will not take: it becomes a marker the Worker dead-letters.
        const item = batch[index]
        if (!item || item.event.body.includes('"notifyEdgeMarker"')) continue
        item.event = markerFor(item.event, 'rejected-by-ingest', reason)
        item.size = wireSize(item.event)
        this.#metrics.markers.inc({ marker: 'rejected-by-ingest' })
        replaced += 1
      }
      if (replaced > 0) {
        this.#log.warn({ status: outcome.status, replaced }, 'sink refused events; sending markers instead')
        continue
      }
      this.#healthy = false
      const wait = outcome.retryAfterMs ?? backoffMs(attempt)
      const log = outcome.status === '401' || outcome.status === '403' ? this.#log.error : this.#log.warn
      log.call(
        this.#log,
        { status: outcome.status, attempt, waitMs: Math.round(wait), events: batch.length, error: outcome.error },
        outcome.status === '401' || outcome.status === '403'
          ? 'sink rejects our token: check SINK_TOKEN against the Worker INGEST_TOKEN; retrying'
          : 'sink failed; retrying',
      )
      await sleep(wait, this.#stop.signal)
    }
  }

  async #post(events: InboundEvent[]): Promise<{
    ok: boolean
    status: string
    retryAfterMs?: number
    refused?: Map<number, string>
    error?: string
  }> {
    let response: Response
    try {
      response = await fetch(this.#options.url, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.#options.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ events }),
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
      return { ok: false, status, refused: refusedEvents(text, events.length) }
    }
    return {
      ok: false,
      status,
      retryAfterMs: retryAfterMs(response.headers.get('retry-after')),
      error: text.slice(0, 300),
    }
  }
}

/**
 * Which events a 400/413 answer names (`issues[].field` = `events[3]…`). An
 * answer that names none refuses the whole request, so every event is named.
 */
function refusedEvents(text: string, count: number): Map<number, string> {
  const refused = new Map<number, string>()
  let issues: { field?: string; message?: string }[] = []
  let message = 'refused by the ingest route'
  try {
    const body = JSON.parse(text) as { error?: { message?: string; issues?: { field?: string; message?: string }[] } }
    issues = body.error?.issues ?? []
    message = body.error?.message ?? message
  } catch {
    // Not our error format: the whole request was refused.
  }
  for (const issue of issues) {
    const index = /^events\[(\d+)\]/.exec(issue.field ?? '')?.[1]
    if (index !== undefined && Number(index) < count) {
      const previous = refused.get(Number(index))
      refused.set(Number(index), `${previous ? `${previous}; ` : ''}${issue.field}: ${issue.message}`)
    }
  }
  if (refused.size === 0) for (let index = 0; index < count; index += 1) refused.set(index, message)
  return refused
}
