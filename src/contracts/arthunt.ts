import { z } from 'zod'
import { CancellationKey, Id, Text, Timestamp } from './fields.ts'

/**
 * The ArtHunt family (ArtHunt's email-notification AsyncAPI): body
 * `{ envelope, data }` published on exchange `arthunt.notifications`. The
 * envelope and the pieces its events share live here; each event type's
 * `data` is in its module under src/events. Optional fields also accept
 * `null`, which is how a Go producer without `omitempty` writes an absent pointer.
 */

/** The common envelope. `eventType` is any string here; the decoder decides what it knows. */
export const ArtHuntEnvelopeSchema = z.object({
  eventId: Id,
  eventType: z.string().min(1),
  /** Version 1 today; a higher one is accepted while the fields we need are present. */
  schemaVersion: z.number().int().min(1),
  occurredAt: Timestamp,
  producer: Text,
  traceId: z.string().nullish(),
  /** Withdraws what this event notified when a cancellation of this key comes (its kind may derive one too). */
  cancellationKey: CancellationKey.nullish(),
})

/** A recipient carried inline in `data`: the address travels with the event. */
export const Recipient = z.object({
  userId: Id,
  email: z.email(),
  displayName: Text,
})

/** Who did it. */
export const Actor = z.object({
  userId: Id,
  displayName: Text,
})

/** The envelope of an ArtHunt event. */
export type ArtHuntEnvelope = z.infer<typeof ArtHuntEnvelopeSchema>

/** Consumer idempotency key of an ArtHunt event. */
export function artHuntIdempotencyKey(eventType: string, eventId: string): string {
  return `arthunt:${eventType}:${eventId}`
}
