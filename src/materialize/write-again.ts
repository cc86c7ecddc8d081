import type { NotificationRow } from '../notifications/row.ts'
import { dispatchFor } from '../queue/dispatch-message.ts'
import type { Outgoing } from '../queue/send.ts'
import { notificationWrites } from './notification-writes.ts'

/** What a write sends on, once the changes of its transaction's statements are known. */
export type SendsAfter = (changed: (statement: number) => boolean) => Outgoing[]

/**
 * A notification that waited (for its contact, for its in-app item), written
 * again as planning writes it now: `take` (the statement that takes the
 * waiting row out, only while it still waits) and then planning's own write
 * of `made` — its digest, its throttle's window — appended to `statements`.
 * Returns what goes on the dispatch queue once the transaction ran: nothing
 * unless `take` applied (a concurrent delivery wrote it), else the
 * notification when it is to be sent on its own, a throttled one the window
 * counted, and a digest this write opened, each at its time.
 */
export function writeAgain(
  db: D1Database,
  take: D1PreparedStatement,
  made: NotificationRow,
  statements: D1PreparedStatement[],
  now: Date,
): SendsAfter {
  const first = statements.length
  statements.push(take)
  const marks = notificationWrites(db, [made], now.toISOString(), statements)
  const alone = made.status === 'pending' && !made.throttle
  return (changed) =>
    changed(first)
      ? [
          ...(alone ? [dispatchFor(made.id, made.scheduledAt, now)] : []),
          ...marks.counted
            .filter((mark) => changed(mark.statement))
            .map((mark) => dispatchFor(mark.id, mark.scheduledAt, now)),
          ...marks.opens
            .filter((mark) => changed(mark.statement))
            .map((mark) => dispatchFor(mark.id, mark.closesAt, now)),
        ]
      : []
}
