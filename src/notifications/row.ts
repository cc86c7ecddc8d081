import { sha256Hex } from '../crypto.ts'
import { bucketOf, bucketOfId } from '../d1/shards.ts'
import type { Urgency } from '../events/define.ts'
import type { NotificationStatus } from './status.ts'

/** A notification as materialize writes it. */
export type NotificationRow = {
  id: string
  idempotencyKey: string
  eventId: string
  source: string
  kind: string
  channel: string
  urgency: Urgency
  recipientUserId: string
  recipientEmail: string | null
  /** The pseudonym of `recipientEmail` (src/erasure/pseudonym.ts), for the suppression gate to match an erased address. */
  recipientHash: string | null
  recipientName: string | null
  locale: string | null
  timeZone: string | null
  subject: string | null
  textBody: string | null
  htmlBody: string | null
  templateVersion: number | null
  status: Extract<NotificationStatus, 'pending' | 'awaiting-contact' | 'opted-out' | 'digested' | 'escalating'>
  statusReason: string | null
  errorCode: string | null
  isFallback: boolean
  decisionPerson: string | null
  decisionRequest: string | null
  /** When the decision was made (ISO), for matching a fallback without a request id. */
  decisionAt: string | null
  scheduledAt: string
  traceId: string | null
  /** The key a cancellation names to withdraw it (src/cancel/). */
  cancellationKey?: string | null
  /** The one-click unsubscribe link of an optional kind (List-Unsubscribe, `{{ unsubscribeUrl }}`). */
  unsubscribeUrl: string | null
  /**
   * The template model (JSON) of a notification awaiting its contact, to
   * render it when the contact arrives, or of a digest's member, to render
   * the digest when it closes.
   */
  model: string | null
  /** A digested notification's digest, when it has to open one: its id and close (./digest.ts). */
  digest?: { id: string; closesAt: string }
  /** The throttle of its kind, for one to be sent at once (./throttle.ts). */
  throttle?: Throttle
  /**
   * An email that waits for its in-app item (./escalation.ts): the in-app
   * notification whose item decides, the mark that spares the email, and —
   * once the feed decided that the email goes — when it decided.
   */
  escalation?: { of: string; unless: 'seen' | 'read'; decidedAt?: string }
}

/**
 * The id of the notification for (event, recipient, channel, kind): derived,
 * so that a redelivered event names the same notifications (INV-NTF-1). It
 * carries its recipient's bucket (`ntf_b<bucket>_<hash>`), so everything that
 * names a notification — a dispatch message, a dead letter, a delivery
 * event's header, the API — finds its D1 shard without a read
 * (src/d1/shards.ts).
 */
export async function notificationId(eventId: string, userId: string, channel: string, kind: string) {
  const hash = (await sha256Hex(`${eventId}\n${userId}\n${channel}\n${kind}`)).slice(0, 32)
  return `ntf_b${await bucketOf(userId)}_${hash}`
}

/**
 * A new notification id of the same form, for a row no event names: a
 * digest (several events, opened by whichever came first), in the bucket of
 * `beside`, a notification of the same recipient.
 */
export function newNotificationId(beside: string): string {
  return `ntf_b${bucketOfId(beside) ?? 0}_${crypto.randomUUID().replaceAll('-', '')}`
}

/** A kind's throttle as a planned notification carries it. */
export type Throttle = {
  max: number
  windowMinutes: number
  /** When the current window must have begun to still run: now minus the window. */
  windowFloor: string
  /** The digest it folds into past the throttle, opened with this id and close if none is open. */
  digest?: { id: string; closesAt: string }
  /** Its template model (JSON), kept should it fold into the digest. */
  model: string
}
