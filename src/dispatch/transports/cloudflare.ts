import { EmailMessage } from 'cloudflare:email'
import { buildMime, messageIdOf } from '../mime.ts'
import { SendError, type Transport } from './types.ts'

/** Errors of the send_email binding that no retry can fix (the destination or sender is refused). */
const PERMANENT = /not allowed|not verified|invalid (?:destination|recipient|sender|address)|no such user|rejected/i

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
        const message = (cause as Error).message ?? String(cause)
        throw new SendError(`send_email: ${message}`, PERMANENT.test(message), { cause })
      }
    },
  }
}
