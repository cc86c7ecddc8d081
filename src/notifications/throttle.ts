import { NOT_CANCELLED } from './cancel.ts'
import { type DigestMember, OPEN_DIGEST, openDigest } from './digest.ts'
import { insertInto, own, RECIPIENT_COLUMNS, valuesOf } from './insert.ts'
import type { NotificationRow, Throttle } from './row.ts'

/**
 * A kind's throttle — at most `max` notifications of it to one recipient on
 * a channel in any window of `windowMinutes` (a sliding window: no more
 * across the edge of one window than inside it) — decided inside
 * materialize's D1 batch, where D1's single writer makes "how many went out
 * in the window" and "this one goes out" one step: two batches racing for
 * the last place cannot both take it. `throttle_windows.places` keeps the
 * times of the places taken still inside the window. A notification to be
 * sent at once (instant) of a throttled kind is three statements instead of
 * one insert:
 *
 * 1. `openDigestOverThrottle`: for a kind with a digest, opens the
 *    recipient's digest when the window is full and none is open;
 * 2. `insertThrottled`: the notification — `pending` while the window has
 *    room (`throttled` = 1: it holds a place); past it, folded into the open
 *    digest (`digested`), or, for a kind without a digest, `throttled`:
 *    recorded and counted, never sent;
 * 3. `takePlace`: takes its place in the window when (2) wrote it `pending`.
 *
 * The dispatch stage reads the rows (2)/(3) and (1) changed: a message for
 * the notification only when (3) took a place, one for the digest only when
 * (1) opened it. The places are taken when the notification is written; a
 * send that comes later than that (a paused transport, retries) is held to
 * the same window when it is claimed (`throttleGate`), so the emails a
 * recipient gets keep the limit too.
 */

/** A notification of a throttled kind as planned: pending, with its throttle. */
export type ThrottledRow = NotificationRow & { status: 'pending'; throttle: Throttle }

/** Whether a planned notification is subject to its kind's throttle. */
export function isThrottled(row: NotificationRow): row is ThrottledRow {
  return row.status === 'pending' && row.throttle !== undefined
}

// The window is full: as many places taken in it as the throttle allows. Over parameters: recipient, kind,
// channel, max, window floor (now minus the window).
const windowFull = (user: string, kind: string, channel: string, max: string, floor: string) =>
  `(SELECT count(*) FROM throttle_windows t, json_each(t.places) p
    WHERE t.user_id = ${user} AND t.kind = ${kind} AND t.channel = ${channel} AND p.value > ${floor}) >= ${max}`

/** The window of the row being inserted is full (over its named values and `max`, `window_floor`). */
const FULL = windowFull('{recipient_user_id}', '{kind}', '{channel}', '{max}', '{window_floor}')

/** The throttle's own values, beside the row's, for `FULL`. */
function throttleValues(row: ThrottledRow): Record<string, unknown> {
  return { max: row.throttle.max, window_floor: row.throttle.windowFloor }
}

/**
 * Opens the recipient's digest of the kind when the window is full, none is
 * open, and the notification does not exist yet (`openDigest`, under one more
 * condition).
 */
export function openDigestOverThrottle(db: D1Database, row: ThrottledRow, now: string): D1PreparedStatement {
  const digest = row.throttle.digest as { id: string; closesAt: string }
  const member: DigestMember = { ...row, status: 'digested', digest }
  return openDigest(db, member, now, FULL, throttleValues(row))
}

/**
 * Inserts the notification as `pending` while its window has room; past it,
 * as a member of the open digest when the kind has one (its model kept, its
 * own rendering dropped), else `throttled` (its rendering kept: what it would
 * have said). Nothing when it exists.
 */
export function insertThrottled(db: D1Database, row: ThrottledRow, now: string): D1PreparedStatement {
  const unlessFolded = (column: string) => `CASE WHEN fold THEN NULL ELSE {${column}} END`
  return insertInto(db, {
    values: {
      ...valuesOf(row, now),
      ...throttleValues(row),
      model: row.throttle.model,
      folds: row.throttle.digest ? 1 : 0,
      reason: `over the throttle of ${row.throttle.max} per ${row.throttle.windowMinutes} min`,
    },
    columns: {
      ...own('id', 'idempotency_key', 'event_id', ...RECIPIENT_COLUMNS),
      subject: unlessFolded('subject'),
      text_body: unlessFolded('text_body'),
      html_body: unlessFolded('html_body'),
      template_version: unlessFolded('template_version'),
      status: "CASE WHEN fold THEN 'digested' WHEN over THEN 'throttled' ELSE 'pending' END",
      status_reason:
        "CASE WHEN fold THEN {reason} || ': told in the next digest' WHEN over THEN {reason} ELSE NULL END",
      is_fallback: '0',
      ...own('scheduled_at', 'trace_id'),
      enqueued_at: '{now}',
      created_at: '{now}',
      updated_at: '{now}',
      unsubscribe_url: '{unsubscribe_url}',
      ...own('escalation_of', 'escalation_unless', 'escalated_at', 'cancellation_key'),
      model: 'CASE WHEN fold THEN {model} ELSE NULL END',
      recipient_hash: '{recipient_hash}',
      digest_id: `CASE WHEN fold THEN ${OPEN_DIGEST} END`,
      throttled: 'CASE WHEN over THEN 0 ELSE 1 END',
    },
    from: `(SELECT ${FULL} AS over, ${FULL} AND {folds} = 1 AS fold)`,
    where: `NOT EXISTS (SELECT 1 FROM notifications WHERE id = {id})${row.cancellationKey ? ` AND ${NOT_CANCELLED}` : ''}`,
  })
}

/**
 * Takes a place in the window for the notification `insertThrottled` just
 * wrote `pending` (its `created_at` is this write's): a redelivered event,
 * whose row is older, takes none. The places that left the window go.
 * Parameters: user, kind, channel, id, now, window floor.
 */
export function takePlace(db: D1Database, row: ThrottledRow, now: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO throttle_windows (user_id, kind, channel, places)
       SELECT ?1, ?2, ?3, json_array(?5)
       WHERE EXISTS (SELECT 1 FROM notifications WHERE id = ?4 AND status = 'pending' AND created_at = ?5)
       ON CONFLICT (user_id, kind, channel) DO UPDATE SET places = (
         SELECT json_group_array(value) FROM (
           SELECT value FROM json_each(throttle_windows.places) WHERE value > ?6 UNION ALL SELECT ?5 ORDER BY 1))`,
    )
    .bind(row.recipientUserId, row.kind, row.channel, row.id, now, row.throttle.windowFloor)
}

/** A throttled kind on a channel, as the claim's throttle gate takes it: its limit and window. */
export type ThrottlePolicy = { kind: string; channel: string; max: number; seconds: number }

const plus = (base: string, seconds: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ${base}, ${seconds} || ' seconds')`

/**
 * The throttle held at the claim: a notification that took a place when it
 * was written (`throttled` = 1) goes out only while its recipient got fewer
 * than `max` of its kind on its channel in the window before now — sent,
 * being sent under a live lease, or gone out for all we know (`unknown`) —
 * counting those before it in the same
 * claim batch. One that would exceed it is not claimed: it stays `pending`,
 * due when the oldest of those emails leaves the window (in a minute, when
 * all of them are in flight), and goes then. A notification delayed past its
 * place's time (a paused transport, retries) cannot bunch up with later ones:
 * the recipient's emails keep the limit in any sliding window. Parameters:
 * the claim batch's JSON (`IN_CLAIM_BATCH`), now, JSON array of `ThrottlePolicy`.
 */
export function throttleGate(
  db: D1Database,
  claims: string,
  now: string,
  policies: readonly ThrottlePolicy[],
): D1PreparedStatement {
  const ofTriple = `s.throttled = 1 AND s.recipient_user_id = d.user_id AND s.kind = d.kind AND s.channel = d.channel`
  return db
    .prepare(
      `WITH policy AS (
         SELECT json_extract(value, '$.kind') AS kind, json_extract(value, '$.channel') AS channel,
           json_extract(value, '$.max') AS max, json_extract(value, '$.seconds') AS seconds FROM json_each(?3)),
       due AS (
         SELECT n.id, n.recipient_user_id AS user_id, n.kind, n.channel, p.max, p.seconds,
           ${plus('?2', "'-' || p.seconds")} AS floor,
           row_number() OVER (PARTITION BY n.recipient_user_id, n.kind, n.channel ORDER BY n.scheduled_at, n.id) AS rank
         FROM notifications n JOIN policy p ON p.kind = n.kind AND p.channel = n.channel
         WHERE n.id IN (SELECT json_extract(value, '$.id') FROM json_each(?1))
           AND n.throttled = 1 AND n.status = 'pending' AND n.scheduled_at <= ?2),
       over AS (
         SELECT d.id, d.seconds,
           (SELECT min(s.sent_at) FROM notifications s WHERE ${ofTriple} AND s.status = 'sent' AND s.sent_at > d.floor)
             AS oldest
         FROM due d
         WHERE d.rank + (SELECT count(*) FROM notifications s WHERE ${ofTriple}
                           AND ((s.status = 'sent' AND s.sent_at > d.floor)
                                OR (s.status = 'sending' AND s.lease_until >= ?2) OR s.status = 'unknown'))
               > d.max)
       UPDATE notifications SET updated_at = ?2,
         scheduled_at = (SELECT CASE WHEN o.oldest IS NULL THEN ${plus('?2', "'+60'")}
                                     ELSE ${plus('o.oldest', "'+' || (o.seconds + 1)")} END
                         FROM over o WHERE o.id = notifications.id),
         status_reason = 'waiting for a place in its throttle: the recipient had as many as it allows in its window'
       WHERE id IN (SELECT id FROM over)
       RETURNING id, scheduled_at`,
    )
    .bind(claims, now, JSON.stringify(policies))
}
