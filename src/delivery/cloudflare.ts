import { z } from 'zod'
import type { DeliveryEvent, DeliveryStatus, SuppressionRequest } from './model.ts'

const Text = z.string().min(1).max(1000)

/**
 * A Cloudflare Email Sending event, as an event subscription puts it on the
 * queue (`cf.email.sending.message.*`). Only what this Worker reads is checked;
 * fields Cloudflare adds later pass through.
 */
export const CloudflareEmailEventSchema = z.object({
  type: z.enum([
    'cf.email.sending.message.delivered',
    'cf.email.sending.message.deferred',
    'cf.email.sending.message.bounced',
    'cf.email.sending.message.failed',
    'cf.email.sending.message.rejected',
    'cf.email.sending.message.complained',
  ]),
  source: z.looseObject({ type: z.literal('email.sending') }),
  payload: z.looseObject({
    eventId: z.string().min(1).max(200),
    messageId: z.string().min(1).max(998),
    recipient: z.string().min(3).max(320).optional(),
    terminal: z.boolean().optional(),
    delivery: z.looseObject({
      status: z.string().max(100),
      smtpStatusCode: z.string().max(20).optional(),
      smtpEnhancedStatusCode: z.string().max(20).optional(),
      smtpResponse: Text.optional(),
    }),
    bounce: z
      .looseObject({ type: z.enum(['hard', 'soft']), classification: Text.optional(), reason: Text.optional() })
      .optional(),
    rejection: z.looseObject({ reason: Text, party: Text.optional(), detail: Text.optional() }).optional(),
    complaint: z.looseObject({ type: Text.optional() }).optional(),
    failure: z.looseObject({ reason: Text }).optional(),
  }),
  metadata: z.looseObject({ eventTimestamp: z.iso.datetime({ offset: true }) }),
})

/** A Cloudflare Email Sending event. */
export type CloudflareEmailEvent = z.infer<typeof CloudflareEmailEventSchema>

const STATUS: Record<CloudflareEmailEvent['type'], DeliveryStatus> = {
  'cf.email.sending.message.delivered': 'delivered',
  'cf.email.sending.message.deferred': 'deferred',
  'cf.email.sending.message.bounced': 'bounced',
  'cf.email.sending.message.failed': 'failed',
  'cf.email.sending.message.rejected': 'failed',
  'cf.email.sending.message.complained': 'complained',
}

/** A Cloudflare event in the common model. */
export function fromCloudflare(event: CloudflareEmailEvent): DeliveryEvent {
  const { payload } = event
  return {
    provider: 'cloudflare',
    providerEventId: payload.eventId,
    providerMessageId: payload.messageId,
    // Its message id is our Message-ID, which the notification keeps: no other name is needed.
    notificationId: null,
    type: event.type,
    status: STATUS[event.type],
    occurredAt: new Date(event.metadata.eventTimestamp).toISOString(),
    recipient: payload.recipient ?? null,
    detail: {
      smtpStatusCode: payload.delivery.smtpStatusCode,
      smtpEnhancedStatusCode: payload.delivery.smtpEnhancedStatusCode,
      smtpResponse: payload.delivery.smtpResponse,
      bounce: payload.bounce,
      rejection: payload.rejection,
      complaint: payload.complaint,
      failure: payload.failure,
    },
    suppression: suppressionOf(event),
  }
}

/**
 * A hard bounce or a complaint: for good. A bounce after the provider gave up
 * on temporary failures: for a while. Cloudflare refusing the address as
 * suppressed: for as long as providers keep theirs. A deferral is not a bounce.
 */
function suppressionOf(event: CloudflareEmailEvent): SuppressionRequest | null {
  const { payload } = event
  if (event.type === 'cf.email.sending.message.complained') {
    return {
      cause: 'complaint',
      reason: `spam complaint (${payload.complaint?.type ?? 'unspecified'})`,
      until: 'never',
    }
  }
  if (event.type === 'cf.email.sending.message.bounced') {
    const reason = payload.bounce?.reason ?? payload.delivery.smtpResponse ?? 'bounced'
    return payload.bounce?.type === 'soft'
      ? { cause: 'soft-bounce', reason, until: 'soft' }
      : { cause: 'hard-bounce', reason, until: 'never' }
  }
  if (event.type === 'cf.email.sending.message.rejected' && payload.rejection?.reason === 'suppressed') {
    return { cause: 'provider', reason: payload.rejection.detail ?? 'suppressed by the provider', until: 'provider' }
  }
  return null
}
