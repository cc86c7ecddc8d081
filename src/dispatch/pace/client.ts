import { sha256Hex } from '../../crypto.ts'
import type { Logger } from '../../log.ts'
import { type PaceObserver, type RateAnswer, reportOf, type SlotSeen } from './answer.ts'
import type { SendPace } from './send-pace.ts'

/**
 * The longest a send waits for its slot inside the invocation. A burst of the
 * consumers in flight — 4 invocations of 6 sends each — is 24 sends, under 6
 * s at Resend's default 5 a second: those wait their turn. A longer wait means
 * the pace is held (a 429's `retry-after`) or the backlog is deeper than what
 * is in flight, and an invocation that sat on it would hold its lease and its
 * batch for nothing: the notification goes back on the queue instead.
 */
export const PACE_MAX_WAIT_MS = 10_000

/** What the pace says about one send: go now (its wait is over), or come back `at`. */
export type PaceDecision = { kind: 'go' } | { kind: 'later'; at: Date }

/**
 * The Worker's side of the send pace (./send-pace.ts) for one invocation:
 * `slot()` before each send, `observe()` from the transport after each
 * answer. The object is named after the account — a hash of the API key, not
 * the key — so every invocation sending for that account shares its pace.
 * When the object cannot be reached, the send goes unpaced (logged): the
 * provider's own 429 still stops it, and a stalled pace would stop all mail.
 */
export class Pace implements PaceObserver {
  readonly #namespace: DurableObjectNamespace<SendPace>
  readonly #apiKey: string
  readonly #perSecond: number
  readonly #log: Logger
  #stub: Promise<DurableObjectStub<SendPace>> | undefined
  /** The rate of the last slot: what a limit in an answer is compared with. */
  #pacedAt: number
  /** What the pace said about each waiting answer's slot (./slots.ts), by its request's idempotency key. */
  readonly #slots = new Map<string, SlotSeen>()

  constructor(namespace: DurableObjectNamespace<SendPace>, apiKey: string, perSecond: number, log: Logger) {
    this.#namespace = namespace
    this.#apiKey = apiKey
    this.#perSecond = perSecond
    this.#log = log
    this.#pacedAt = perSecond
  }

  /**
   * Waits for the slot of the send whose idempotency key is `key`, or says
   * when to come back when it is more than PACE_MAX_WAIT_MS away.
   */
  async slot(key: string): Promise<PaceDecision> {
    let slot: Awaited<ReturnType<SendPace['take']>>
    try {
      slot = await (await this.#object()).take({ perSecond: this.#perSecond, maxWaitMs: PACE_MAX_WAIT_MS })
    } catch (error) {
      this.#log.warn('pace.unavailable', { code: 'NTF_DEPENDENCY_FAILED', error })
      return { kind: 'go' }
    }
    this.#pacedAt = slot.perSecond
    if (slot.kind === 'later') return { kind: 'later', at: new Date(slot.at) }
    this.#slots.set(key, { startedInWindow: slot.startedInWindow, careful: slot.careful })
    if (slot.waitMs > 0) await scheduler.wait(slot.waitMs)
    return { kind: 'go' }
  }

  /** Tells the pace what an answer changes, when it changes anything (most do not). */
  async observe(answer: RateAnswer): Promise<void> {
    const slot = this.#slots.get(answer.key)
    this.#slots.delete(answer.key)
    const report = reportOf(answer, this.#perSecond, this.#pacedAt, slot)
    if (!report) return
    try {
      await (await this.#object()).observe(report)
    } catch (error) {
      this.#log.warn('pace.unavailable', { code: 'NTF_DEPENDENCY_FAILED', error })
    }
  }

  #object(): Promise<DurableObjectStub<SendPace>> {
    this.#stub ??= paceName(this.#apiKey).then((name) => this.#namespace.getByName(name))
    return this.#stub
  }
}

/** The name of the pace object of the Resend account behind `apiKey`: a prefix of the key's SHA-256. */
export async function paceName(apiKey: string): Promise<string> {
  return `resend:${(await sha256Hex(apiKey)).slice(0, 32)}`
}
