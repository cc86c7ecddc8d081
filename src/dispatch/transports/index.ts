import type { Config } from '../../config.ts'
import { cloudflareTransport } from './cloudflare.ts'
import { resendTransport } from './resend.ts'
import type { Transport } from './types.ts'

export { SendError, type Sent, type Transport } from './types.ts'

/** The transport `EMAIL_TRANSPORT` names. */
export function transportFor(env: Env, config: Config): Transport {
  if (config.EMAIL_TRANSPORT === 'resend') {
    return resendTransport({ apiKey: config.RESEND_API_KEY as string, baseUrl: config.RESEND_API_URL })
  }
  return cloudflareTransport(env.EMAIL)
}

/**
 * Whether a retry through this transport is answered rather than sent again:
 * Resend keeps an `Idempotency-Key` for 24 h; the send_email binding has none,
 * so an unknown outcome through it waits for delivery events instead.
 */
export function hasIdempotencyKey(transport: Config['EMAIL_TRANSPORT']): boolean {
  return transport === 'resend'
}
