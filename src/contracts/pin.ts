import { z } from 'zod'
import { CancellationKey, Timestamp } from './fields.ts'

/**
 * The PIN family (PIN's profile-events consumer spec): metadata travels in
 * headers (Kafka record headers), the value is the JSON payload with
 * PascalCase fields. The headers live here; each event type's payload is in
 * its module under src/events.
 */

/** The contract version this consumer was written for; any other is warn-and-proceed. */
export const PIN_CONTRACT_VERSION = '1'

/** Header metadata of a PIN event. Header names are matched case-insensitively. */
export const PinHeadersSchema = z.object({
  'message-id': z.string().trim().min(1).max(512),
  'event-type': z.string().trim().min(1),
  'created-at': Timestamp.optional(),
  'contract-version': z.string().optional(),
  'aggregate-id': z.string().optional(),
  /** Trace context, when the producer propagates one. */
  'trace-id': z.string().max(200).optional(),
  traceparent: z.string().max(200).optional(),
  /** Withdraws what this event notified when a cancellation of this key comes. */
  'cancellation-key': CancellationKey.optional(),
})

/** Header metadata of a PIN event. */
export type PinHeaders = z.infer<typeof PinHeadersSchema>

/** Consumer idempotency key of a PIN event (the PIN profile-events spec). */
export function pinIdempotencyKey(eventType: string, messageId: string): string {
  return `notifications-profile:${eventType}:${messageId}`
}
