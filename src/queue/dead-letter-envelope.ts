import { z } from 'zod'

/**
 * What a consumer sends to `notify-dlq` when it gives up on a message: the
 * original body and why. A message that Cloudflare itself moved after
 * `max_retries` arrives without this envelope. It sits beside settle.ts, which
 * sends it, so that src/queue/ depends on no consumer; the notify-dlq consumer
 * (src/dead-letters/) reads it from here.
 */
export const DeadLetterEnvelopeSchema = z.object({
  notifyEdgeDeadLetter: z.literal(1),
  /** The queue the message died on. */
  queue: z.string().min(1),
  code: z.string().min(1),
  error: z.string(),
  attempts: z.number().int().positive(),
  /** Identity of this failure (message id + attempt): a redelivery of the same failure is a no-op. */
  failureId: z.string().min(1),
  failedAt: z.iso.datetime(),
  /** The notification kind it was about, when known. */
  kind: z.string().optional(),
  /** The original message body. */
  message: z.unknown(),
})

/** A dead letter as consumers send it. */
export type DeadLetterEnvelope = z.infer<typeof DeadLetterEnvelopeSchema>

/**
 * Wraps a failed message for `notify-dlq`: a delivered message, or what stands
 * for one (a batch member that failed without a message of its own).
 */
export function deadLetterEnvelope(
  queue: string,
  message: Pick<Message<unknown>, 'id' | 'attempts' | 'body'>,
  failure: { code: string; error: string; kind?: string },
  now = new Date(),
): DeadLetterEnvelope {
  return {
    notifyEdgeDeadLetter: 1,
    queue,
    code: failure.code,
    error: failure.error,
    attempts: message.attempts,
    failureId: `${message.id}:${message.attempts}`,
    failedAt: now.toISOString(),
    ...(failure.kind ? { kind: failure.kind } : {}),
    message: message.body,
  }
}
