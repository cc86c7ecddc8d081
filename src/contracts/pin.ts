import { z } from 'zod'
import { Locale, RequiredId, Text, Timestamp, TimeZone } from './fields.ts'

/**
 * PIN profile events (seed `pin-profile-events-consumer.txt`) and the contact
 * replica feed. Metadata travels in headers (Kafka record headers), the value
 * is the JSON payload with PascalCase fields.
 */

/** Event types this version handles, by the `event-type` header. */
export const PIN_EVENT_TYPES = [
  'verification-request-submitted',
  'verification-completed',
  'person-upserted',
  'contact-upserted',
] as const

/** A PIN event type we handle. */
export type PinEventType = (typeof PIN_EVENT_TYPES)[number]

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
})

/** `verification-request-submitted`: a person asked for verification; the reviewer is told. */
export const VerificationRequestSubmittedSchema = z.object({
  RequestId: RequiredId,
  PersonId: RequiredId,
  /** The person's owner. */
  UserId: RequiredId,
  /** The assigned reviewer; when absent, every member of the reviewer pool is told. */
  ReviewerUserId: RequiredId.nullish(),
})

/**
 * `verification-completed`: a decision; the owner is told. `Decision` is any
 * non-empty string here: a value other than approved/rejected is a newer
 * producer's enum member and is ignored, not dead-lettered (seed 002).
 */
export const VerificationCompletedSchema = z.object({
  RequestId: RequiredId,
  PersonId: RequiredId,
  UserId: RequiredId,
  Decision: Text,
  /** Why it was rejected. Sensitive: shown only to the owner, never logged. */
  Reason: z.string().max(4000).nullish(),
})

/** `person-upserted`: a person changed; only a verification status change may notify (fallback). */
export const PersonUpsertedSchema = z.object({
  PersonId: RequiredId,
  UserId: RequiredId,
  VerificationStatus: z.string().nullish(),
  PreviousVerificationStatus: z.string().nullish(),
  VerificationRequestId: RequiredId.nullish(),
})

/** `contact-upserted`: the address book the PIN consumer reads recipients from. */
export const ContactUpsertedSchema = z.object({
  UserId: RequiredId,
  Email: z.email(),
  Locale: Locale.nullish(),
  TimeZone: TimeZone.nullish(),
  DisplayName: z.string().max(500).nullish(),
  /** Monotonic per user: an older version never overwrites a newer one. */
  Version: z.number().int().nonnegative(),
})

/** The payload schema for each handled event type. */
export const PIN_PAYLOAD_SCHEMAS = {
  'verification-request-submitted': VerificationRequestSubmittedSchema,
  'verification-completed': VerificationCompletedSchema,
  'person-upserted': PersonUpsertedSchema,
  'contact-upserted': ContactUpsertedSchema,
} as const

/** Header metadata of a PIN event. */
export type PinHeaders = z.infer<typeof PinHeadersSchema>
/** Payload of `verification-request-submitted`. */
export type VerificationRequestSubmitted = z.infer<typeof VerificationRequestSubmittedSchema>
/** Payload of `verification-completed`. */
export type VerificationCompleted = z.infer<typeof VerificationCompletedSchema>
/** Payload of `person-upserted`. */
export type PersonUpserted = z.infer<typeof PersonUpsertedSchema>
/** Payload of `contact-upserted`. */
export type ContactUpserted = z.infer<typeof ContactUpsertedSchema>

/** Consumer idempotency key of a PIN event (seed 002). */
export function pinIdempotencyKey(eventType: string, messageId: string): string {
  return `notifications-profile:${eventType}:${messageId}`
}
