import { z } from 'zod'
import type { Outgoing } from '../queue/send.ts'

/** A `notify-dispatch` message: which notification to send. The row holds everything else. */
export const DispatchMessageSchema = z.object({ notificationId: z.string().min(1).max(100) })

/** A `notify-dispatch` message. */
export type DispatchMessage = z.infer<typeof DispatchMessageSchema>

/** The dispatch message for a notification due at `scheduledAt`, delayed until then. */
export function dispatchFor(notificationId: string, scheduledAt: string, now: Date): Outgoing {
  const delaySeconds = (Date.parse(scheduledAt) - now.getTime()) / 1000
  return {
    body: { notificationId } satisfies DispatchMessage,
    delaySeconds: delaySeconds > 0 ? delaySeconds : undefined,
  }
}
