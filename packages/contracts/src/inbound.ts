import { z } from 'zod'

/** Longest `origin` the ingest route accepts (characters). */
export const ORIGIN_MAX_CHARS = 1024

/** Longest `sourceMessageId` the ingest route accepts (characters). */
export const SOURCE_MESSAGE_ID_MAX_CHARS = 512

/**
 * The wire format between the bridge and the Worker: one event as
 * the bridge read it from its source, payload untouched.
 */
export const InboundEventSchema = z.object({
  source: z.enum(['postgres', 'rabbitmq', 'kafka', 'http']),
  /** Where it came from, e.g. `kafka:pin.profile.persons.v1/3@1207`. */
  origin: z.string().min(1).max(ORIGIN_MAX_CHARS),
  /** Outbox message_id, AMQP message-id (or sha256 of the body), Kafka header message-id. */
  sourceMessageId: z.string().min(1).max(SOURCE_MESSAGE_ID_MAX_CHARS),
  /** When the bridge read it (ISO-8601). */
  receivedAt: z.iso.datetime({ offset: true }),
  headers: z.record(z.string(), z.string()),
  /** The original payload: UTF-8 text, or base64 when `encoding` is `base64`. */
  body: z.string(),
  encoding: z.enum(['utf8', 'base64']).optional(),
})

/** One event on the wire, bridge → Worker → `notify-events`. */
export type InboundEvent = z.infer<typeof InboundEventSchema>

/** The body of `POST /v1/ingest`. Limits on count and bytes are checked by the route. */
export const IngestRequestSchema = z.object({
  events: z.array(InboundEventSchema),
})

/**
 * Marker that replaces a payload which cannot travel as a queue message (too
 * large) or that the ingest route refused. The Worker dead-letters it, so the
 * operator sees it; the original stays at its source (outbox row, broker DLQ,
 * Kafka log).
 */
export const MarkerBodySchema = z.object({
  notifyEdgeMarker: z.enum(['payload-too-large', 'rejected-by-ingest']),
  /** Size of the original payload in bytes. */
  size: z.number().int().nonnegative(),
  /** Hex sha256 of the original payload. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** The first 1 KB of the original payload, for the operator. */
  head: z.string().max(4096),
  /** Why the ingest route refused it, when it did. */
  reason: z.string().max(4000).optional(),
})

/** Body of a marker event. */
export type MarkerBody = z.infer<typeof MarkerBodySchema>
