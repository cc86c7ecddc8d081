/**
 * Cloudflare's `send_email` binding as the lifecycle model scripts it. It
 * keeps what the binding documents and the model depends on: one message per
 * call, no idempotency key — a message sent twice is two emails — and errors
 * that carry a `code` (https://developers.cloudflare.com/email-service/api/send-emails/workers-api/):
 * `E_SENDER_NOT_VERIFIED` and `E_DAILY_LIMIT_EXCEEDED` (about the account),
 * `E_RATE_LIMIT_EXCEEDED`, `E_VALIDATION_ERROR`, and `E_INTERNAL_SERVER_ERROR`,
 * which may come after the message was taken. A lost connection throws
 * without a code. Faults the model injects: the next sends' answers
 * (`script`), and lasting states (`unverified`, `dailyLimit`, and `down`:
 * an outage, every send answered by an internal error or a lost connection
 * before anything was taken).
 */

/**
 * What a provider's answer told the sender, as the model judges a request:
 * `accepted` (it answered that it took it), `refused` (a refusal that says
 * nothing was sent), or `maybe` (no answer, an internal error, a 5xx: it may
 * have been taken).
 */
export type ProviderAnswer = 'accepted' | 'refused' | 'maybe'

/** One message the binding took. */
export type BindingEmail = { messageId: string; notificationId: string; to: string; at: number }

export type BindingFault =
  | 'lose-after-accept'
  | 'internal-after-accept'
  | 'internal-before-accept'
  | 'rate-limit'
  | 'validation'
  | 'unverified'
  | 'daily-limit'

export class BindingStandIn {
  readonly emails: BindingEmail[] = []
  readonly script: BindingFault[] = []
  unverified = false
  dailyLimit = false
  down = false
  #downAnswers = 0
  /** Told of every message taken (Cloudflare's event subscription reports it). */
  onAccept: ((email: BindingEmail) => Promise<void>) | undefined
  /**
   * Runs when a message is handed over, before it is answered, with the
   * notification it carries: what happens while its send is in flight.
   */
  onRequest: ((notificationIds: string[]) => Promise<void>) | undefined
  /** Told how each send was answered, with the notification it carried. */
  onAnswer: ((notificationIds: string[], answer: ProviderAnswer) => void) | undefined

  emailsOf(notificationId: string): BindingEmail[] {
    return this.emails.filter((email) => email.notificationId === notificationId)
  }

  async send(message: EmailMessage): Promise<{ messageId: string }> {
    const raw = String((message as unknown as Record<string, unknown>)['EmailMessage::raw'] ?? '')
    const header = (name: string) => new RegExp(`^${name}:\\s*(.+)$`, 'im').exec(raw)?.[1]?.trim() ?? ''
    const notificationId = header('X-Notify-Edge-Notification')
    await this.onRequest?.([notificationId])
    try {
      const sent = await this.#send(message, header)
      this.onAnswer?.([notificationId], 'accepted')
      return sent
    } catch (error) {
      const code = (error as { code?: string }).code
      this.onAnswer?.([notificationId], code && code !== 'E_INTERNAL_SERVER_ERROR' ? 'refused' : 'maybe')
      throw error
    }
  }

  async #send(message: EmailMessage, header: (name: string) => string): Promise<{ messageId: string }> {
    const fault = this.script.shift()
    if (this.down) {
      // An outage: nothing taken, answered by an internal error or not at all.
      this.#downAnswers += 1
      if (this.#downAnswers % 2 === 0) throw new Error('Network connection lost.')
      throw coded('E_INTERNAL_SERVER_ERROR', 'internal error')
    }
    if (this.unverified || fault === 'unverified') throw coded('E_SENDER_NOT_VERIFIED', 'sender not verified')
    if (this.dailyLimit || fault === 'daily-limit') throw coded('E_DAILY_LIMIT_EXCEEDED', 'daily limit exceeded')
    if (fault === 'rate-limit') throw coded('E_RATE_LIMIT_EXCEEDED', 'rate limit exceeded')
    if (fault === 'validation') throw coded('E_VALIDATION_ERROR', 'invalid message')
    if (fault === 'internal-before-accept') throw coded('E_INTERNAL_SERVER_ERROR', 'internal error')
    const messageId = header('Message-ID')
    const email = { messageId, notificationId: header('X-Notify-Edge-Notification'), to: message.to, at: Date.now() }
    this.emails.push(email)
    await this.onAccept?.(email)
    if (fault === 'lose-after-accept') throw new Error('Network connection lost.')
    if (fault === 'internal-after-accept') throw coded('E_INTERNAL_SERVER_ERROR', 'internal error')
    return { messageId }
  }
}

function coded(code: string, message: string): Error {
  return Object.assign(new Error(message), { code })
}
