import { z } from 'zod'
import type { Outgoing } from './send.ts'

/**
 * A `notify-dispatch` message: which notification to send, and the due time
 * (`scheduled_at`) it was enqueued for. The row holds everything else. A
 * message whose `due` is no longer the row's is stale — the notification was
 * tried and rescheduled since, and another message carries the new time — so
 * it is acked without a claim: one notification never has two retry chains.
 * Messages without `due` (enqueued before it existed) claim whenever due.
 */
export const DispatchMessageSchema = z.object({
  notificationId: z.string().min(1).max(100),
  due: z.iso.datetime().optional(),
})

/** A `notify-dispatch` message. */
export type DispatchMessage = z.infer<typeof DispatchMessageSchema>

/** The dispatch message for a notification due at `scheduledAt`, delayed until then. */
export function dispatchFor(notificationId: string, scheduledAt: string, now: Date): Outgoing {
  const delaySeconds = (Date.parse(scheduledAt) - now.getTime()) / 1000
  return {
    body: { notificationId, due: scheduledAt } satisfies DispatchMessage,
    delaySeconds: delaySeconds > 0 ? delaySeconds : undefined,
  }
}
