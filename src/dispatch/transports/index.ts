import type { Config, TransportName } from '../../config.ts'
import type { Logger } from '../../log.ts'
import { Pace } from '../pace/client.ts'
import { cloudflareTransport } from './cloudflare.ts'
import { resendTransport } from './resend.ts'
import type { Transport } from './types.ts'

export { type Courier, type Delivered, SendError, type Sent, sendErrorOf, type Transport } from './types.ts'

/** A transport by its name; a resend transport reports every answer to `pace`. */
export function transportFor(env: Env, config: Config, name: TransportName, pace?: Pace): Transport {
  if (name === 'resend') {
    return resendTransport({
      apiKey: config.RESEND_API_KEY as string,
      baseUrl: config.RESEND_API_URL,
      pace,
      timeoutSeconds: config.RESEND_TIMEOUT_SECONDS,
    })
  }
  return cloudflareTransport(env.EMAIL)
}

/**
 * The send pace of a transport, if it has one. Only `resend` is
 * paced: Resend documents a rate per second per team and says in every answer
 * how much of it is left (https://resend.com/docs/api-reference/rate-limit).
 * Cloudflare's Email Service documents daily sending limits per account, no
 * rate per second (https://developers.cloudflare.com/email-service/platform/limits/),
 * and its binding's `E_RATE_LIMIT_EXCEEDED` names no time to wait, so there is
 * nothing to pace it to; that code keeps its own longer wait (./cloudflare-errors.ts).
 */
export function paceFor(env: Env, config: Config, name: TransportName, log: Logger): Pace | undefined {
  if (name !== 'resend') return undefined
  return new Pace(env.SEND_PACE, config.RESEND_API_KEY as string, config.RESEND_REQUESTS_PER_SECOND, log)
}

/**
 * The transports whose retry is answered rather than sent again: Resend
 * keeps an `Idempotency-Key` for 24 h; the send_email binding has none, so an
 * unknown outcome through it waits for delivery events instead.
 */
export const KEYED_TRANSPORTS: readonly TransportName[] = ['resend']

/**
 * How long before the provider's idempotency window ends a retry under a
 * key stops being sent: a send started then still reaches the provider well
 * inside the window (a send lasts at most a lease; clocks differ a little).
 */
const IDEMPOTENCY_MARGIN_MS = 3_600_000

/**
 * The earliest first try whose retry may still be sent now under the same
 * key (ISO): a send that may have gone out before it would reach a provider
 * that has forgotten its key, and go out twice (src/notifications/gates.ts,
 * `idempotencyWindowGate`). RESEND_IDEMPOTENCY_WINDOW_HOURS, less an hour.
 */
export function idempotencyEdge(config: Config, now: Date): string {
  return new Date(
    now.getTime() - config.RESEND_IDEMPOTENCY_WINDOW_HOURS * 3_600_000 + IDEMPOTENCY_MARGIN_MS,
  ).toISOString()
}
