import { EmailMessage } from 'cloudflare:email'
import { buildMime, messageIdOf } from '../mime.ts'
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
      try {
        const result = await binding.send(new EmailMessage(mail.from.address, mail.to.address, raw))
        return { providerId: result?.messageId ?? messageIdOf(mail), raw, messageId: messageIdOf(mail) }
      } catch (cause) {
        const { outcome, delaySeconds, code } = meaningOf(cause)
        const message = (cause as Error)?.message ?? String(cause)
        throw new SendError(`send_email: ${code ? `${code}: ` : ''}${message}`, outcome, { cause, delaySeconds })
      }
    },
  }
}
