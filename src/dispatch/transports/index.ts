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
