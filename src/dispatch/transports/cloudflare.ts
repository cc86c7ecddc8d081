import { EmailMessage } from 'cloudflare:email'
import { checkMessageLimits } from '../../mail/limits.ts'
import { buildMime, messageIdOf } from '../../mail/mime.ts'
import { meaningOf } from './cloudflare-errors.ts'
import { SendError, type Transport } from './types.ts'

/**
 * The `send_email` binding: the MIME built by mimetext, sent as is. Locally,
 * wrangler writes each message to an `.eml` file and lists it in its explorer.
 */
export function cloudflareTransport(binding: SendEmail): Transport {
  return {
    name: 'cloudflare',
    async send(mail) {
      const raw = buildMime(mail)
      // The binding's documented limits, before it is asked: a clear code instead of its refusal.
      const over = checkMessageLimits(mail, raw)
      if (over) throw new SendError(`send_email: ${over.message}`, 'permanent', { code: over.code })
      try {
        const result = await binding.send(new EmailMessage(mail.from.address, mail.to.address, raw))
        return { providerId: result?.messageId ?? messageIdOf(mail), raw, messageId: messageIdOf(mail) }
      } catch (cause) {
        const { outcome, delaySeconds, code } = meaningOf(cause)
        const message = (cause as Error)?.message ?? String(cause)
        // A refusal sent nothing; only an outcome left unknown may have come after the message was taken.
        throw new SendError(`send_email: ${code ? `${code}: ` : ''}${message}`, outcome, {
          cause,
          delaySeconds,
          providerCode: code,
          nothingSent: outcome !== 'unknown',
          // An internal error, a delivery failure or a lost connection: the service may be down.
          outage: outcome === 'unknown' || code === 'E_DELIVERY_FAILED',
        })
      }
    },
  }
}
