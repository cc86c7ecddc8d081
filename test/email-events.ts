/** Events of the recipient's side for the tests: a response to an address, and the reports a provider sends about it. */
import { freshInbound, guid } from './helpers.ts'

/** A response.created event to an address of its own. */
export function responseTo(email: string, userId = guid()) {
  return freshInbound('response.created', (value) => {
    const recipient = (value.data as { recipient: Record<string, unknown> }).recipient
    recipient.email = email
    recipient.userId = userId
  })
}

/** The event id of a response.created event. */
export const eventIdOf = (event: { body: string }) => JSON.parse(event.body).envelope.eventId as string

/** A Cloudflare Email Sending event, in the shape its event subscription puts on the queue. */
export function cloudflareEvent(
  kind: 'delivered' | 'deferred' | 'bounced' | 'failed' | 'rejected' | 'complained',
  messageId: string,
  recipient: string,
  payload: Record<string, unknown> = {},
  at = new Date().toISOString(),
) {
  return {
    type: `cf.email.sending.message.${kind}`,
    source: { type: 'email.sending', zoneId: '023e105f4ecef8ad9ca31a8372d0c353', domain: 'notify-edge.example' },
    payload: {
      eventId: guid(),
      messageId: messageId.replace(/^<|>$/g, ''),
      sender: 'notifications@notify-edge.example',
      recipient,
      subject: 'Новый отклик на ваш проект',
      terminal: kind !== 'deferred',
      delivery: { status: kind },
      ...payload,
    },
    metadata: {
      accountId: 'f9f79265f388666de8122cfb508d7776',
      eventSubscriptionId: '1830c4bb612e43c3af7f4cada31fbf3f',
      eventSchemaVersion: 1,
      eventTimestamp: at,
    },
  }
}

/** A hard bounce's payload fields. */
export const hardBounce = {
  delivery: { status: 'bounced', smtpStatusCode: '550', smtpEnhancedStatusCode: '5.1.1' },
  bounce: { type: 'hard', classification: 'permanent_failure', reason: '550 5.1.1 User unknown' },
}
