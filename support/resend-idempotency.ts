/**
 * Resend's idempotency rules, for the stand-ins of Resend (an email provider's
 * API cannot run here): the test fake, the chaos run's provider and the
 * lifecycle model's. As Resend documents them
 * (https://resend.com/docs/dashboard/emails/idempotency-keys and
 * https://resend.com/docs/api-reference/errors):
 *
 * - "Resend checks whether an email with the same idempotency key has already
 *   been sent in the last 24 hours": a request that sent nothing (refused)
 *   keeps no key, and a key is forgotten 24 h after its email was sent — a
 *   request after that sends again;
 * - the same key with the same payload within the window is answered with
 *   the first answer and sends nothing;
 * - the same key with another payload is refused, 409
 *   `invalid_idempotent_request`;
 * - a request while the first one with that key is still running is
 *   refused, 409 `concurrent_idempotent_requests`.
 */

/** Resend's window: "the last 24 hours". */
export const RESEND_IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000

/** What Resend does with one request under a key. */
export type IdempotentDecision<Answer> =
  | { kind: 'new' }
  | { kind: 'replay'; answer: Answer }
  | { kind: 'other-payload' }
  | { kind: 'running' }

/**
 * The keys of one team. `decide` says what a request does; `begin`/`end`
 * bracket a request that goes on to send; `accept` keeps the key of what it
 * sent, with its answer, from the time it was sent.
 */
export function resendIdempotency<Answer>(options: { now?: () => number; windowMs?: number } = {}) {
  const now = options.now ?? Date.now
  const windowMs = options.windowMs ?? RESEND_IDEMPOTENCY_WINDOW_MS
  const kept = new Map<string, { payload: string; answer: Answer; at: number }>()
  const running = new Set<string>()
  return {
    decide(key: string, payload: string): IdempotentDecision<Answer> {
      const first = kept.get(key)
      if (first && now() - first.at >= windowMs) kept.delete(key)
      const live = kept.get(key)
      if (live) return live.payload === payload ? { kind: 'replay', answer: live.answer } : { kind: 'other-payload' }
      return running.has(key) ? { kind: 'running' } : { kind: 'new' }
    },
    begin(key: string): void {
      running.add(key)
    },
    end(key: string): void {
      running.delete(key)
    },
    accept(key: string, payload: string, answer: Answer): void {
      running.delete(key)
      kept.set(key, { payload, answer, at: now() })
    },
  }
}
