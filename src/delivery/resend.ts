import { z } from 'zod'
import type { DeliveryEvent, SuppressionRequest, TimelineStatus } from './model.ts'

const Text = z.string().min(1).max(1000)

/** The Resend webhook events that are about a message's delivery, with what each means. */
export const RESEND_DELIVERY_TYPES: Record<string, TimelineStatus> = {
  'email.sent': 'accepted',
  'email.delivered': 'delivered',
  'email.delivery_delayed': 'deferred',
  'email.bounced': 'bounced',
  'email.complained': 'complained',
  'email.failed': 'failed',
  'email.suppressed': 'failed',
}

/** A Resend webhook event about a delivery (its `data` as Resend documents it). */
export const ResendEmailEventSchema = z.object({
  type: z.enum(Object.keys(RESEND_DELIVERY_TYPES) as [string, ...string[]]),
  created_at: z.iso.datetime({ offset: true }),
  data: z.looseObject({
    email_id: z.string().min(1).max(200),
    to: z.array(z.string().min(3).max(320)).max(50).optional(),
    // "Custom headers included with the email" (OutboundEmailEventData in Resend's OpenAPI document).
    headers: z
      .array(z.looseObject({ name: z.string().max(200), value: z.string().max(1000) }))
      .max(100)
      .optional(),
    bounce: z.looseObject({ type: Text, subType: Text.optional(), message: Text.optional() }).optional(),
    failed: z.looseObject({ reason: Text }).optional(),
    suppressed: z.looseObject({ type: Text.optional(), message: Text.optional() }).optional(),
  }),
})

/** A Resend delivery event. */
export type ResendEmailEvent = z.infer<typeof ResendEmailEventSchema>

/**
 * What the webhook route puts on `notify-email-events` once the signature
 * held: the verified event and Svix's id of it (one id per event, the same on
 * every retry, so each event is recorded once).
 */
export const ResendEnvelopeSchema = z.object({
  notifyEdgeResendEvent: z.literal(1),
  svixId: z.string().min(1).max(200),
  event: z.unknown(),
})

/** The header of every email this Worker sends that names its notification (src/mail/mime.ts). */
const NOTIFICATION_HEADER = 'x-notify-edge-notification'

/** A Resend event in the common model. */
export function fromResend(svixId: string, event: ResendEmailEvent): DeliveryEvent {
  const { data } = event
  return {
    provider: 'resend',
    providerEventId: svixId,
    providerMessageId: data.email_id,
    notificationId: data.headers?.find((header) => header.name.toLowerCase() === NOTIFICATION_HEADER)?.value ?? null,
    type: event.type,
    status: RESEND_DELIVERY_TYPES[event.type] as TimelineStatus,
    occurredAt: new Date(event.created_at).toISOString(),
    recipient: data.to?.[0] ?? null,
    detail: { bounce: data.bounce, failed: data.failed, suppressed: data.suppressed },
    suppression: suppressionOf(event),
  }
}

/** Resend's bounce types: `Permanent` for good; `Transient` and `Undetermined` for a while. */
function suppressionOf(event: ResendEmailEvent): SuppressionRequest | null {
  const { data } = event
  if (event.type === 'email.complained') return { cause: 'complaint', reason: 'spam complaint', until: 'never' }
  if (event.type === 'email.bounced') {
    const reason = data.bounce?.message ?? data.bounce?.subType ?? 'bounced'
    return data.bounce?.type === 'Permanent'
      ? { cause: 'hard-bounce', reason, until: 'never' }
      : { cause: 'soft-bounce', reason, until: 'soft' }
  }
  if (event.type === 'email.suppressed') {
    return { cause: 'provider', reason: data.suppressed?.message ?? 'suppressed by the provider', until: 'provider' }
  }
  return null
}
