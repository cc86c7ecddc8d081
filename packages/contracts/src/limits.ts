/**
 * Size limits shared by the bridge and the Worker, so that both sides agree on
 * what fits before anything is sent.
 */

/** Cloudflare Queues: at most this many messages per `sendBatch`. */
export const QUEUE_BATCH_MAX_MESSAGES = 100

/**
 * Bytes we put in one `sendBatch` call. The platform allows 256 KB per batch;
 * we stay below it so that request framing never turns a valid batch into a
 * permanent failure.
 */
export const QUEUE_BATCH_MAX_BYTES = 250_000

/** Cloudflare Queues: one message holds at most 128 KB (miniflare: 128,000 bytes). */
export const QUEUE_MESSAGE_MAX_BYTES = 128_000

/**
 * Largest serialized InboundEvent the ingest route accepts. Smaller than a
 * queue message so that a dead-letter envelope (code, error, attempts) around
 * the original still fits in one message of `notify-dlq`.
 */
export const INBOUND_EVENT_MAX_BYTES = 120_000

/** `POST /v1/ingest`: events per request. */
export const INGEST_MAX_EVENTS = 100

/** `POST /v1/ingest`: request body bytes (256 KB). */
export const INGEST_MAX_BYTES = 256 * 1024

/** UTF-8 byte length of a string. */
export function utf8Length(text: string): number {
  return new TextEncoder().encode(text).byteLength
}
