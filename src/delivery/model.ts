import type { SuppressionCause } from '../suppression/suppression-store.ts'

/**
 * What a provider last said about a message: the `delivery_status` of a
 * notification. `accepted` (the provider took it) only joins the timeline.
 */
export type DeliveryStatus = 'delivered' | 'deferred' | 'bounced' | 'complained' | 'failed'

/** A status of the timeline: a delivery status, or the provider's acceptance. */
export type TimelineStatus = DeliveryStatus | 'accepted'

/** The providers whose events this Worker reads. */
export type Provider = 'cloudflare' | 'resend'

/** What a delivery event asks of the suppression list. */
export type SuppressionRequest = { cause: SuppressionCause; reason: string; until: 'never' | 'soft' | 'provider' }

/**
 * One provider event about one sent message, whatever the provider: the model
 * Cloudflare's event subscription and Resend's webhook are both read into.
 */
export type DeliveryEvent = {
  provider: Provider
  /** Unique per provider: Cloudflare's `payload.eventId`, Resend's `svix-id`. */
  providerEventId: string
  /** The id the provider gave the message when it accepted it (the notification's `provider_id`). */
  providerMessageId: string
  /**
   * The notification the message was, as the event itself says (a Resend
   * event carries the email's custom headers, `X-Notify-Edge-Notification`
   * among them): how an event finds a notification whose provider id was
   * never learnt (the answer was lost), or null.
   */
  notificationId: string | null
  /** The provider's own event type, kept as it came. */
  type: string
  status: TimelineStatus
  occurredAt: string
  /** The address the event is about, when it names one. Never logged. */
  recipient: string | null
  /** SMTP codes, bounce type, rejection reason: shown to operators, never logged. */
  detail: Record<string, unknown>
  suppression: SuppressionRequest | null
}
