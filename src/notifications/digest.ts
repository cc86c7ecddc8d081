import type { Urgency } from '../events/define.ts'
import { STATUS_AS_FILTER } from '../sql.ts'
import { NOT_CANCELLED } from './cancel.ts'
import { insertInto, own, RECIPIENT_COLUMNS, valuesOf } from './insert.ts'
import type { NotificationRow } from './row.ts'

/**
 * A digest's membership, written in materialize's D1 batch with the event's
 * processed mark: `openDigest` then `insertMember`, for each notification
 * told in a digest. Both are guarded by the member not existing, so an event
 * redelivered, replayed, or planned again after its processed mark was pruned
 * neither joins a digest twice nor opens an empty one.
 */

/** A planned member: a digested notification, with the digest it opens when none is open. */
export type DigestMember = NotificationRow & { status: 'digested'; digest: { id: string; closesAt: string } }

/**
 * Opens a digest for the member's recipient, kind and channel unless one is
 * open (the partial unique index `notifications_collecting` makes the insert
 * do nothing then) or the member already exists. The digest row takes the
 * member's recipient snapshot and unsubscribe link; it is `collecting` until
 * `scheduled_at`, its close. `onlyIf`: one more SQL condition over the
 * insert's named values and `extra` (the throttle's: ./throttle.ts).
 */
export function openDigest(
  db: D1Database,
  member: DigestMember,
  now: string,
  onlyIf = 'true',
  extra: Readonly<Record<string, unknown>> = {},
): D1PreparedStatement {
  return insertInto(db, {
    values: { ...valuesOf(member, now), digest_id: member.digest.id, closes_at: member.digest.closesAt, ...extra },
    columns: {
      id: '{digest_id}',
      idempotency_key: "'digest:' || {digest_id}",
      event_id: "'digest:' || {digest_id}",
      ...own(...RECIPIENT_COLUMNS),
      status: "'collecting'",
      scheduled_at: '{closes_at}',
      enqueued_at: '{now}',
      created_at: '{now}',
      updated_at: '{now}',
      ...own('unsubscribe_url', 'recipient_hash'),
      is_digest: '1',
    },
    where: `NOT EXISTS (SELECT 1 FROM notifications WHERE id = {id}) AND ${onlyIf}`,
  })
}

/** The digest open for the recipient, kind and channel of the row being inserted (its named values). */
export const OPEN_DIGEST = `(SELECT id FROM notifications
  WHERE recipient_user_id = {recipient_user_id} AND kind = {kind} AND channel = {channel} AND status = 'collecting')`

/**
 * Inserts a member into the digest open for its recipient, kind and channel —
 * the one `openDigest` just opened, or the one that was open already — as
 * `digested` with its template model. Nothing when the member exists (its
 * digest may be long closed: the guard comes before the insert, as a
 * `digested` row without a digest would break the table's CHECK before any
 * conflict is seen).
 */
export function insertMember(db: D1Database, member: DigestMember, now: string): D1PreparedStatement {
  return insertInto(db, {
    values: valuesOf(member, now),
    columns: {
      ...own('id', 'idempotency_key', 'event_id', ...RECIPIENT_COLUMNS),
      status: "'digested'",
      is_fallback: '0',
      scheduled_at: '{now}',
      trace_id: '{trace_id}',
      enqueued_at: 'NULL',
      created_at: '{now}',
      updated_at: '{now}',
      ...own('unsubscribe_url', 'model', 'recipient_hash'),
      ...own('escalation_of', 'escalation_unless', 'escalated_at', 'cancellation_key'),
      digest_id: OPEN_DIGEST,
    },
    where: `NOT EXISTS (SELECT 1 FROM notifications WHERE id = {id})${member.cancellationKey ? ` AND ${NOT_CANCELLED}` : ''}`,
  })
}

/** Whether a planned notification is told in a digest. */
export function isDigestMember(row: NotificationRow): row is DigestMember {
  return row.status === 'digested' && row.digest !== undefined
}

/**
 * Fences the due digests of a list so that nothing joins them any more:
 * `collecting → closing`, and stamps `enqueued_at`, from which the cron's
 * stuck search counts its grace should this close not finish. A digest
 * already `closing` (a close that died, or one running now) stays as it is
 * and is closed again: the content is the same, and only one write of it
 * lands (`closeDigest`). Parameters: JSON array of ids, now.
 */
export function fenceDigests(db: D1Database, ids: string, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'closing', updated_at = ?2, enqueued_at = ?2
       WHERE id IN (SELECT value FROM json_each(?1)) AND ${STATUS_AS_FILTER} = 'collecting' AND scheduled_at <= ?2`,
    )
    .bind(ids, now)
}

/** A fenced digest, as its close reads it. */
export type ClosingDigest = {
  id: string
  kind: string
  channel: string
  urgency: Urgency
  recipient_user_id: string
  unsubscribe_url: string | null
  event_id: string
  source: string
  scheduled_at: string
  send_attempts: number
}

/** The fenced digests of a list (read in the fence's D1 batch, after it). Parameters: JSON array of ids. */
export function closingDigests(db: D1Database, ids: string): D1PreparedStatement {
  return db
    .prepare(
      `SELECT id, kind, channel, urgency, recipient_user_id, unsubscribe_url, event_id, source, scheduled_at,
         send_attempts FROM notifications
       WHERE id IN (SELECT value FROM json_each(?1)) AND ${STATUS_AS_FILTER} = 'closing'`,
    )
    .bind(ids)
}

/** One member of a closing digest, as its close reads it: `position` from 1, oldest first, of `total`. */
export type DigestMemberRow = {
  id: string
  digest_id: string
  model: string | null
  recipient_email: string | null
  recipient_name: string | null
  recipient_hash: string | null
  locale: string | null
  time_zone: string | null
  position: number
  total: number
}

/**
 * The members a digest's email tells, oldest first — by the time they were
 * written, then by `rowid`, the order they were written in (a batch of events
 * writes them in the same millisecond, in the events' order): the first `?2` (the
 * email's `items`), and the newest, whose recipient snapshot the email goes
 * to (a contact that changed while the digest collected), each with how many
 * there are in all (`count`). Members of a digest not fenced are not read:
 * the statement runs after the fence, in its D1 batch, so it sees exactly
 * the members the fence closed in. Parameters: JSON array of digest ids, most items.
 */
export function digestMembers(db: D1Database, ids: string, maxItems: number): D1PreparedStatement {
  return db
    .prepare(
      `SELECT id, digest_id, model, recipient_email, recipient_name, recipient_hash, locale, time_zone, position, total
       FROM (SELECT id, digest_id, model, recipient_email, recipient_name, recipient_hash, locale, time_zone,
               row_number() OVER (PARTITION BY digest_id ORDER BY created_at, rowid) AS position,
               count(*) OVER (PARTITION BY digest_id) AS total
             FROM notifications INDEXED BY notifications_digest
             WHERE digest_id IN (SELECT id FROM notifications
                                 WHERE id IN (SELECT value FROM json_each(?1)) AND ${STATUS_AS_FILTER} = 'closing'))
       WHERE position <= ?2 OR position = total
       ORDER BY digest_id, position`,
    )
    .bind(ids, maxItems)
}

/** What a closed digest's email is: rendered content, recipient snapshot, size and send time. */
export type ClosedDigest = {
  id: string
  subject: string
  textBody: string
  htmlBody: string | null
  templateVersion: number
  locale: string
  timeZone: string | null
  recipientEmail: string | null
  recipientName: string | null
  recipientHash: string | null
  unsubscribeUrl: string | null
  size: number
  scheduledAt: string
}

/**
 * A fenced digest becomes an email: `closing → pending` with its content, its
 * size and its send time (quiet hours apply to it as to any notification).
 * Only under the fence: of two closes of one digest, one write lands.
 * Parameters: see the binding.
 */
export function closeDigest(db: D1Database, digest: ClosedDigest, now: string): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', subject = ?2, text_body = ?3, html_body = ?4, template_version = ?5,
         locale = ?6, time_zone = ?7, recipient_email = ?8, recipient_name = ?9, recipient_hash = ?10,
         unsubscribe_url = ?11, digest_size = ?12, scheduled_at = ?13, status_reason = NULL, error_code = NULL,
         updated_at = ?14, enqueued_at = ?14
       WHERE id = ?1 AND status = 'closing'
       RETURNING id, scheduled_at`,
    )
    .bind(
      digest.id,
      digest.subject,
      digest.textBody,
      digest.htmlBody,
      digest.templateVersion,
      digest.locale,
      digest.timeZone,
      digest.recipientEmail,
      digest.recipientName,
      digest.recipientHash,
      digest.unsubscribeUrl,
      digest.size,
      digest.scheduledAt,
      now,
    )
}

/**
 * A fenced digest that cannot become an email: `failed` with the code (a
 * template missing or failing: replay closes it again once it is fixed); or
 * `superseded` — it told nothing, or told one notification, which goes out as
 * itself (`sendMemberAlone`). Parameters: id, status, code, reason, now, size.
 */
export function endDigest(
  db: D1Database,
  id: string,
  status: 'failed' | 'superseded',
  code: string | null,
  reason: string,
  now: string,
  size: number | null = null,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = ?2, error_code = ?3, status_reason = ?4, updated_at = ?5,
         digest_size = coalesce(?6, digest_size)
       WHERE id = ?1 AND status = 'closing'`,
    )
    .bind(id, status, code, reason, now, size)
}

/** A notification's own rendering, as a digest's close writes it. */
export type OwnContent = Pick<
  ClosedDigest,
  'subject' | 'textBody' | 'htmlBody' | 'templateVersion' | 'locale' | 'unsubscribeUrl' | 'scheduledAt'
>

/**
 * The only member of a fenced digest leaves it and goes out as itself —
 * `pending` with its own kind's rendering, the email it would have been sent
 * at once — so that a quiet hour's single response is not "1 new response",
 * and its event's story ends in its own email. Only while the digest is
 * fenced, in the batch that then ends the digest. Parameters: see the binding.
 */
export function sendMemberAlone(
  db: D1Database,
  memberId: string,
  digestId: string,
  content: OwnContent,
  now: string,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE notifications SET status = 'pending', digest_id = NULL, model = NULL, subject = ?3, text_body = ?4,
         html_body = ?5, template_version = ?6, locale = ?7, unsubscribe_url = ?8, scheduled_at = ?9,
         status_reason = 'its digest told it alone: sent as itself', updated_at = ?10, enqueued_at = ?10
       WHERE id = ?1 AND status = 'digested' AND digest_id = ?2
         AND EXISTS (SELECT 1 FROM notifications WHERE id = ?2 AND status = 'closing')
       RETURNING id, scheduled_at`,
    )
    .bind(
      memberId,
      digestId,
      content.subject,
      content.textBody,
      content.htmlBody,
      content.templateVersion,
      content.locale,
      content.unsubscribeUrl,
      content.scheduledAt,
      now,
    )
}
