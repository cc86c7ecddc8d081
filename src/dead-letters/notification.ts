import { QUEUES } from '../queue/names.ts'
import { deadLetterIdOf, upsertNotificationDeadLetter } from './dead-letter-store.ts'

/** The notification a dead letter is about, as its row names it. */
export type FailedNotification = {
  id: string
  event_id: string
  source: string | null
  kind: string
  /** Its `scheduled_at` when it failed: the dead letter's message is the dispatch message of that time. */
  scheduled_at: string
}

/** Why a notification ended without an email, as its dead letter records it. */
export type NotificationFailure = {
  /** The status the same D1 batch gives it. */
  status: 'failed' | 'undeliverable'
  code: string
  error: string
  attempts: number
  /** The time the status is written with (`updated_at`): the same in both statements. */
  at: string
}

/**
 * The dead letter of a notification that ends `failed` (or `undeliverable`,
 * its contact never came), as one statement of the D1 batch that writes that
 * status: a notification is never failed without its dead letter, and the
 * dead letter exists only if the status was written (the claim was still
 * this dispatch's). Its message is the notification's dispatch message —
 * what a replay sends again, and the row the notify-dlq consumer would have
 * made of it — and it names the notification's event, so the event's story
 * shows it and the list finds it by the event id.
 */
export async function notificationDeadLetter(
  db: D1Database,
  notification: FailedNotification,
  failure: NotificationFailure,
): Promise<D1PreparedStatement> {
  const body = JSON.stringify({ notificationId: notification.id, due: notification.scheduled_at })
  return upsertNotificationDeadLetter(
    db,
    {
      id: await deadLetterIdOf(QUEUES.dispatch, body),
      queue: QUEUES.dispatch,
      code: failure.code,
      error: failure.error,
      attempts: failure.attempts,
      source: notification.source,
      origin: null,
      sourceMessageId: null,
      eventId: notification.event_id,
      eventType: null,
      kind: notification.kind,
      body,
      failureId: `${notification.id}:${failure.status}:${failure.at}`,
      failedAt: failure.at,
    },
    { id: notification.id, status: failure.status, updatedAt: failure.at },
  )
}
