import { NOT_CANCELLED } from './cancel.ts'
import type { NotificationRow } from './row.ts'

/**
 * An insert of one notification: the columns it writes, each as an SQL
 * expression over named values (`{name}`, bound as parameters), an optional
 * `from` (a row the expressions may read) and a guard (`where`). Every kind of
 * notification row — one to send, a digest opened, a digest's member, one of
 * a throttled kind — is written by this one statement shape, its columns
 * named rather than bound by position.
 */
export type NotificationInsert = {
  /** The values the expressions name; only those named are bound. */
  values: Readonly<Record<string, unknown>>
  /** Each column written, with the SQL of its value. */
  columns: Readonly<Record<string, string>>
  from?: string
  where?: string
}

/** Each of these columns written with the value of its own name. */
export function own(...names: readonly string[]): Record<string, string> {
  return Object.fromEntries(names.map((name) => [name, `{${name}}`]))
}

/** The columns a planned notification shares with every row it can become, written with their own values. */
export const RECIPIENT_COLUMNS = [
  'source',
  'kind',
  'channel',
  'urgency',
  'recipient_user_id',
  'recipient_email',
  'recipient_name',
  'locale',
  'time_zone',
] as const

/** A planned notification's values, each under its column's name, and `now`. */
export function valuesOf(row: NotificationRow, now: string): Record<string, unknown> {
  return {
    id: row.id,
    idempotency_key: row.idempotencyKey,
    event_id: row.eventId,
    source: row.source,
    kind: row.kind,
    channel: row.channel,
    urgency: row.urgency,
    recipient_user_id: row.recipientUserId,
    recipient_email: row.recipientEmail,
    recipient_name: row.recipientName,
    locale: row.locale,
    time_zone: row.timeZone,
    subject: row.subject,
    text_body: row.textBody,
    html_body: row.htmlBody,
    template_version: row.templateVersion,
    status: row.status,
    status_reason: row.statusReason,
    error_code: row.errorCode,
    is_fallback: row.isFallback ? 1 : 0,
    decision_person: row.decisionPerson,
    decision_request: row.decisionRequest,
    decision_at: row.decisionAt,
    scheduled_at: row.scheduledAt,
    trace_id: row.traceId,
    unsubscribe_url: row.unsubscribeUrl,
    model: row.model,
    recipient_hash: row.recipientHash,
    cancellation_key: row.cancellationKey ?? null,
    escalation_of: row.escalation?.of ?? null,
    escalation_unless: row.escalation?.unless ?? null,
    escalated_at: row.escalation?.decidedAt ?? null,
    now,
  }
}

/**
 * The statement of an insert, `ON CONFLICT DO NOTHING`, so that a
 * notification that exists already — by its id, or its (event, recipient,
 * channel, kind) (INV-NTF-1) — is never written twice. Without a `from` or a
 * guard it is `INSERT … VALUES`; with one, `INSERT … SELECT … WHERE`, the
 * `WHERE` always there (SQLite needs it to read `ON CONFLICT` after a
 * `SELECT` as the upsert clause). `VALUES` is kept where it suffices: D1
 * counts a row read for the `SELECT` form.
 */
export function insertInto(db: D1Database, insert: NotificationInsert): D1PreparedStatement {
  const bound: string[] = []
  const fill = (sql: string) =>
    sql.replace(/\{(\w+)\}/g, (_, name: string) => {
      if (!(name in insert.values)) throw new Error(`notification insert: no value named ${name}`)
      const at = bound.includes(name) ? bound.indexOf(name) : bound.push(name) - 1
      return `?${at + 1}`
    })
  const columns = Object.keys(insert.columns)
  const values = columns.map((column) => fill(insert.columns[column] as string)).join(', ')
  const source =
    insert.from === undefined && insert.where === undefined
      ? `VALUES (${values})`
      : `SELECT ${values}${insert.from ? ` FROM ${fill(insert.from)}` : ''} WHERE ${fill(insert.where ?? 'true')}`
  return db
    .prepare(`INSERT INTO notifications (${columns.join(', ')}) ${source} ON CONFLICT DO NOTHING`)
    .bind(...bound.map((name) => insert.values[name]))
}

/**
 * Inserts a notification as planned — to send, awaiting its contact, opted
 * out — unless (event, recipient, channel, kind) already has one (INV-NTF-1).
 * With a `mark`, the row carries it and the caller counts it in the same
 * transaction (./counted.ts); without, the insert trigger counts it.
 */
export function insertNotification(
  db: D1Database,
  row: NotificationRow,
  now: string,
  mark: number | null = null,
): D1PreparedStatement {
  return insertInto(db, {
    values: { ...valuesOf(row, now), count_mark: mark },
    columns: {
      ...own('id', 'idempotency_key', 'event_id', ...RECIPIENT_COLUMNS),
      ...own('subject', 'text_body', 'html_body', 'template_version', 'status', 'status_reason', 'error_code'),
      ...own('is_fallback', 'decision_person', 'decision_request', 'decision_at', 'scheduled_at', 'trace_id'),
      enqueued_at: '{now}',
      created_at: '{now}',
      updated_at: '{now}',
      ...own('unsubscribe_url', 'model', 'recipient_hash', 'count_mark'),
      ...own('escalation_of', 'escalation_unless', 'escalated_at', 'cancellation_key'),
    },
    // A notification whose key was cancelled before its event came: nothing (a cancellation and the
    // write of its event's notifications are never at once in one database).
    where: row.cancellationKey ? NOT_CANCELLED : undefined,
  })
}
