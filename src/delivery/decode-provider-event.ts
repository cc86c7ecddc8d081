import { describeIssues, toFieldIssues } from '@notify-edge/contracts'
import type { z } from 'zod'
import { CloudflareEmailEventSchema, fromCloudflare } from './cloudflare.ts'
import type { DeliveryEvent } from './model.ts'
import { fromResend, ResendEmailEventSchema, ResendEnvelopeSchema } from './resend.ts'

/**
 * A message of `notify-email-events` in the common model, or why it is not
 * one (naming the field). Two shapes arrive there: Cloudflare's events, put
 * there by an event subscription, and Resend's, put there by the webhook
 * route after their signature held.
 */
export function decodeDeliveryEvent(body: unknown): { event: DeliveryEvent } | { error: string } {
  const object = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
  if ('notifyEdgeResendEvent' in object) {
    const envelope = ResendEnvelopeSchema.safeParse(body)
    if (!envelope.success) return invalid(envelope.error)
    const event = ResendEmailEventSchema.safeParse(envelope.data.event)
    if (!event.success) return invalid(event.error, 'event')
    return { event: fromResend(envelope.data.svixId, event.data) }
  }
  const event = CloudflareEmailEventSchema.safeParse(body)
  if (!event.success) return invalid(event.error)
  return { event: fromCloudflare(event.data) }
}

function invalid(error: z.ZodError, prefix = ''): { error: string } {
  return { error: `not a delivery event: ${describeIssues(toFieldIssues(error, prefix))}` }
}
