import { z } from 'zod'
import { HttpUrl, Id, Text, Timestamp } from './fields.ts'

/**
 * ArtHunt email events (seed `arthunt-email-notifications.asyncapi.txt`):
 * body `{ envelope, data }` published on exchange `arthunt.notifications`.
 * Field tables are the seed's; optional fields also accept `null`, which is how
 * a Go producer without `omitempty` writes an absent pointer.
 */

/** Event types this version handles. A newer producer may send others: they are ignored, not dead-lettered. */
export const ARTHUNT_EVENT_TYPES = ['response.created', 'invitation.created'] as const

/** An ArtHunt event type we handle. */
export type ArtHuntEventType = (typeof ARTHUNT_EVENT_TYPES)[number]

/** The common envelope. `eventType` is any string here; the decoder decides what it knows. */
export const ArtHuntEnvelopeSchema = z.object({
  eventId: Id,
  eventType: z.string().min(1),
  /** Version 1 today; a higher one is accepted while the fields we need are present. */
  schemaVersion: z.number().int().min(1),
  occurredAt: Timestamp,
  producer: Text,
  traceId: z.string().nullish(),
})

const Recipient = z.object({
  userId: Id,
  email: z.email(),
  displayName: Text,
})

const Actor = z.object({
  userId: Id,
  displayName: Text,
})

/** `data` of `response.created` (AH-MVP-007): a specialist responded; the project owner is told. */
export const ResponseCreatedDataSchema = z.object({
  responseId: Id,
  projectId: Id,
  projectTitle: Text,
  recipient: Recipient,
  actor: Actor,
  proposedPrice: z.number().int().nonnegative().nullish(),
  proposedCurrency: z.enum(['RUB']).nullish(),
  proposedDeadlineDays: z.number().int().positive().nullish(),
  deepLink: HttpUrl,
})

/** `data` of `invitation.created` (AH-MVP-006): a client invited a specialist; the specialist is told. */
export const InvitationCreatedDataSchema = z.object({
  invitationId: Id,
  /** `null` when the invitation is not tied to a project. */
  projectId: Id.nullish(),
  projectTitle: Text.nullish(),
  recipient: Recipient,
  actor: Actor,
  message: z.string().max(2000).nullish(),
  deepLink: HttpUrl,
})

/** The `data` schema for each handled event type. */
export const ARTHUNT_DATA_SCHEMAS = {
  'response.created': ResponseCreatedDataSchema,
  'invitation.created': InvitationCreatedDataSchema,
} as const

/** The envelope of an ArtHunt event. */
export type ArtHuntEnvelope = z.infer<typeof ArtHuntEnvelopeSchema>
/** Data of `response.created`. */
export type ResponseCreatedData = z.infer<typeof ResponseCreatedDataSchema>
/** Data of `invitation.created`. */
export type InvitationCreatedData = z.infer<typeof InvitationCreatedDataSchema>

/** Consumer idempotency key of an ArtHunt event. */
export function artHuntIdempotencyKey(eventType: string, eventId: string): string {
  return `arthunt:${eventType}:${eventId}`
}
