import type { CountedChange } from '../notifications/counted.ts'
import { insertMember, isDigestMember, openDigest } from '../notifications/digest.ts'
import { insertNotification } from '../notifications/insert.ts'
import type { NotificationRow } from '../notifications/row.ts'
import { insertThrottled, isThrottled, openDigestOverThrottle, takePlace } from '../notifications/throttle.ts'

/**
 * Where an event's statements are whose changes say what its write decided,
 * so the enqueue stage enqueues the close of a digest this write opened, and
 * a throttled notification only when it went out pending.
 */
export type WriteMarks = {
  /** The digests its write may open: the open statement's place among the event's statements, the digest's id and close. */
  opens: { statement: number; id: string; closesAt: string }[]
  /** Its throttled notifications: the statement that counts one sent, the notification's id and due time. */
  counted: { statement: number; id: string; scheduledAt: string }[]
  /** The inserts that count themselves (with a `mark`): the caller counts them after, in the same transaction. */
  changes: CountedChange[]
}

/**
 * The statements that write these notifications, appended to `statements`:
 * a digested one is two — open its digest unless one is open, then join the
 * open one; one of a throttled kind two or three (src/notifications/throttle.ts);
 * any other one insert. The marks say where the statements are whose changes
 * decide what goes on the queue: a digest opened, a throttled one counted.
 * Planning's write and a late contact's release (./release-waiting.ts) both
 * write through it. notify_notifications_total follows the rows by trigger,
 * but for the plain inserts given a `mark` (planning's, the hot path): those
 * are in `changes`, for the caller to count (src/notifications/counted.ts).
 */
export function notificationWrites(
  db: D1Database,
  rows: readonly NotificationRow[],
  now: string,
  statements: D1PreparedStatement[],
  mark: number | null = null,
): WriteMarks {
  const opens: WriteMarks['opens'] = []
  const counted: WriteMarks['counted'] = []
  const changes: CountedChange[] = []
  for (const row of rows) {
    if (isDigestMember(row)) {
      opens.push({ statement: statements.length, id: row.digest.id, closesAt: row.digest.closesAt })
      statements.push(openDigest(db, row, now), insertMember(db, row, now))
    } else if (isThrottled(row)) {
      const { digest } = row.throttle
      if (digest) {
        opens.push({ statement: statements.length, id: digest.id, closesAt: digest.closesAt })
        statements.push(openDigestOverThrottle(db, row, now))
      }
      statements.push(insertThrottled(db, row, now))
      counted.push({ statement: statements.length, id: row.id, scheduledAt: row.scheduledAt })
      statements.push(takePlace(db, row, now))
    } else {
      statements.push(insertNotification(db, row, now, mark))
      if (mark !== null) changes.push({ id: row.id, mark, status: row.status })
    }
  }
  return { opens, counted, changes }
}
