import { describe, expect, it } from 'vitest'
import { RESEND_IDEMPOTENCY_WINDOW_MS, resendIdempotency } from '../support/resend-idempotency.ts'

/** The idempotency rules every stand-in of Resend keeps (support/resend-idempotency.ts). */
describe("Resend's idempotency keys, as the stand-ins keep them", () => {
  it('answers a repeat with the first answer for 24 hours, refuses another payload, and forgets the key after', () => {
    let now = Date.parse('2027-01-01T00:00:00Z')
    const keys = resendIdempotency<string>({ now: () => now })
    expect(keys.decide('k', 'a')).toEqual({ kind: 'new' })
    keys.accept('k', 'a', 'first answer')
    expect(keys.decide('k', 'a')).toEqual({ kind: 'replay', answer: 'first answer' })
    expect(keys.decide('k', 'b')).toEqual({ kind: 'other-payload' })
    now += RESEND_IDEMPOTENCY_WINDOW_MS - 1
    expect(keys.decide('k', 'a')).toEqual({ kind: 'replay', answer: 'first answer' })
    now += 1
    // "in the last 24 hours": a request after them sends again, whatever its payload.
    expect(keys.decide('k', 'a')).toEqual({ kind: 'new' })
    expect(keys.decide('k', 'b')).toEqual({ kind: 'new' })
  })

  it('keeps no key for a request that sent nothing, and refuses one while the first with its key runs', () => {
    const keys = resendIdempotency<string>()
    keys.begin('k')
    expect(keys.decide('k', 'a')).toEqual({ kind: 'running' })
    keys.end('k')
    expect(keys.decide('k', 'a')).toEqual({ kind: 'new' })
  })
})
