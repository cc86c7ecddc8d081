import type { Mail } from '../mime.ts'

/** What a transport reports for a message it accepted. */
export type Sent = { providerId: string; raw: string; messageId: string }

/** Sends one mail; throws `SendError` to say whether trying again can help. */
export type Transport = { name: string; send(mail: Mail): Promise<Sent> }

/** A send failure that knows whether it is transient (retry) or permanent (the notification fails). */
export class SendError extends Error {
  readonly permanent: boolean

  constructor(message: string, permanent: boolean, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'SendError'
    this.permanent = permanent
  }
}
