import { DurableObject } from 'cloudflare:workers'
import { type Logger, loggerFor } from '../../log.ts'
import type { PaceReport } from './answer.ts'
import { CAREFUL_MS, type Slot, type SlotAsk, SlotBook } from './slots.ts'

/** Storage keys of what outlives the object's memory. */
const KEPT = { heldUntil: 'heldUntil', limit: 'limit' } as const

/**
 * The send pace of one provider account (one Resend API key), shared by every
 * `notify-dispatch` invocation wherever it runs: each send asks it for a slot
 * (`take`), and the answers the provider gives correct it (`observe`).
 *
 * Why a Durable Object. The pace needs one up-to-date count that every
 * concurrent consumer invocation reads and changes at once, a few times a
 * second. Cloudflare documents a Durable Object as a single instance that
 * serializes the requests to it, and builds its own rate limiter example on
 * one, with a "next allowed time" as here
 * (https://developers.cloudflare.com/durable-objects/examples/build-a-rate-limiter/);
 * one per account is the scope its example recommends (an object per
 * resource that needs global coordination), and an object's soft limit of
 * 1,000 requests per second (https://developers.cloudflare.com/durable-objects/reference/faq/)
 * is far above a provider's few requests per second. The alternatives do not
 * hold a count: KV is eventually consistent, a write reaching other locations
 * up to a minute later (https://developers.cloudflare.com/kv/concepts/how-kv-works/),
 * so concurrent senders would each read a stale count; D1 could serialize it,
 * but it is the single writer that already carries every claim and mark of
 * the pipeline, and a write per send would queue behind them; the Workers
 * Rate Limiting binding counts per Cloudflare location, over periods of 10 or
 * 60 seconds only, and is documented as "permissive, eventually consistent,
 * and intentionally designed to not be used as an accurate accounting system"
 * (https://developers.cloudflare.com/workers/runtime-apis/bindings/rate-limit/),
 * while Resend counts every request of the team within one second.
 *
 * Its methods do no I/O before they answer, so each runs whole before the
 * next: two senders never get one slot. The slot log lives in memory — an
 * object evicted after a quiet while has nothing in it worth keeping — and
 * the hold and the provider's limit, which can last an hour, in its SQLite
 * storage.
 */
export class SendPace extends DurableObject<Env> {
  readonly #book: SlotBook
  readonly #log: Logger

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.#log = loggerFor(env)
    this.#book = new SlotBook({
      heldUntil: ctx.storage.kv.get<number>(KEPT.heldUntil),
      limit: ctx.storage.kv.get<number>(KEPT.limit),
    })
  }

  /** A send slot, or when to come back (./slots.ts). */
  take(ask: SlotAsk): Slot {
    return this.#book.take(Date.now(), ask)
  }

  /**
   * Corrects the pace after an answer: a hold stops every slot until it ends;
   * a sign that someone else spends the team's rate keeps the pace careful
   * for CAREFUL_MS (./slots.ts); a limit the provider named other than the
   * one known changes the rate, logged once per change (every sender reports
   * the same limit).
   */
  observe(report: PaceReport): void {
    const now = Date.now()
    if (report.shared) this.#book.beCareful(now + CAREFUL_MS)
    if (report.holdSeconds !== undefined && this.#book.hold(now + report.holdSeconds * 1000)) {
      this.ctx.storage.kv.put(KEPT.heldUntil, this.#book.heldUntil)
      const fields = { cause: report.cause, until: new Date(this.#book.heldUntil).toISOString() }
      // A full window of ours, held while careful, is the pace working; anything else means someone else
      // spends the team's rate too (or our requests reach Resend further apart than their slots).
      if (report.shared) this.#log.warn('pace.held', fields)
      else this.#log.debug('pace.held', fields)
    }
    if (report.limit !== undefined) {
      const before = this.#book.perSecond(report.perSecond)
      if (this.#book.limitTo(report.limit)) this.ctx.storage.kv.put(KEPT.limit, report.limit)
      const after = this.#book.perSecond(report.perSecond)
      if (after !== before) {
        this.#log.warn(after < before ? 'pace.lowered' : 'pace.raised', {
          perSecond: after,
          configured: report.perSecond,
          providerLimit: report.limit,
        })
      }
    }
  }
}
