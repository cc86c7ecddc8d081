import { erasedSql } from '../suppression/suppression-store.ts'
import type { DeliveryEvent } from './model.ts'

/**
 * Records a delivery event once: a second delivery of the same event (a queue
 * redelivery, a webhook retry) changes nothing, and the counting trigger
 * (notify_deliveries_total) fires only for the first. Its detail (a bounce's
 * text may quote the address) is not kept when the address, by its
 * `pseudonym`, or the notification was erased.
 * Parameters: the event's fields, the notification it is about, now, the recipient's pseudonym.
 */
export function insertDeliveryEvent(
  db: D1Database,
  event: DeliveryEvent,
  notificationId: string | null,
  now: string,
  pseudonym: string | null,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO delivery_events
         (provider, provider_event_id, provider_message_id, notification_id, type, status, occurred_at, received_at,
          detail)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, CASE WHEN ${erasedSql('?10', '?4')} THEN NULL ELSE ?9 END)
       ON CONFLICT (provider, provider_event_id) DO NOTHING`,
    )
    .bind(
      event.provider,
      event.providerEventId,
      event.providerMessageId,
      notificationId,
      event.type,
      event.status,
      event.occurredAt,
      now,
      JSON.stringify(event.detail),
      pseudonym,
    )
}

/** What an event carries that finds its notification. */
export type EventKeys = { provider: string; providerMessageId: string; notificationId: string | null }

/** The notifications a set of events may be about, with the transport each went through. */
export type EventMatches = {
  byProviderId: Map<string, { id: string; transport: string | null }>
  named: Map<string, string | null>
}

/**
 * The notifications the events may be about, by the provider message id they
 * name — Cloudflare's binding answers with a `<…>` Message-ID while its
 * events carry the bare id, so both forms are looked up — and by the
 * notification ids they carry (a Resend event carries the email's custom
 * headers, ours among them), with the transport each was sent through:
 * `aboutOf` keeps only a provider's own.
 */
export async function notificationsOfEvents(db: D1Database, events: readonly EventKeys[]): Promise<EventMatches> {
  const forms = [...new Set(events.flatMap(({ providerMessageId: id }) => [id, `<${bare(id)}>`, bare(id)]))]
  const ids = [...new Set(events.flatMap((event) => (event.notificationId ? [event.notificationId] : [])))]
  const [byProvider, byId] = await db.batch<{ id: string; provider_id: string; transport: string | null }>([
    db
      .prepare(
        'SELECT id, provider_id, transport FROM notifications WHERE provider_id IN (SELECT value FROM json_each(?1))',
      )
      .bind(JSON.stringify(forms)),
    db
      .prepare('SELECT id, provider_id, transport FROM notifications WHERE id IN (SELECT value FROM json_each(?1))')
      .bind(JSON.stringify(ids)),
  ])
  return {
    byProviderId: new Map(
      (byProvider?.results ?? []).map((row) => [bare(row.provider_id), { id: row.id, transport: row.transport }]),
    ),
    named: new Map((byId?.results ?? []).map((row) => [row.id, row.transport])),
  }
}

/**
 * The notification an event is about — by its provider id, else by the id it
 * carries — only when the provider that reported it is the one that sent it
 * (or the notification names none yet). A Message-ID is the same whichever
 * provider sent the email, and one that failed over may have been taken by
 * both: an event of the other is about a message the notification's record
 * does not hold, and settles nothing of it (`elsewhere` names it, for the log).
 */
export function aboutOf(matched: EventMatches, event: EventKeys): { id: string | null; elsewhere: string | null } {
  const own = (transport: string | null) => transport === null || transport === event.provider
  const byProvider = matched.byProviderId.get(bare(event.providerMessageId))
  const named = event.notificationId !== null && matched.named.has(event.notificationId) ? event.notificationId : null
  const namedTransport = named === null ? null : (matched.named.get(named) ?? null)
  if (byProvider && own(byProvider.transport)) return { id: byProvider.id, elsewhere: null }
  if (named !== null && own(namedTransport)) return { id: named, elsewhere: null }
  return { id: null, elsewhere: byProvider?.id ?? named }
}

/** A provider message id without the angle brackets of a Message-ID. */
export function bare(id: string): string {
  return id.replace(/^<(.*)>$/, '$1')
}

/** A notification's timeline, oldest first. */
export async function timelineOf(db: D1Database, notificationId: string) {
  const { results } = await db
    .prepare(
      `SELECT provider, provider_event_id, type, status, occurred_at, received_at, detail FROM delivery_events
       WHERE notification_id = ?1 ORDER BY occurred_at, received_at`,
    )
    .bind(notificationId)
    .all<{
      provider: string
      provider_event_id: string
      type: string
      status: string
      occurred_at: string
      received_at: string
      detail: string | null
    }>()
  return results.map((row) => ({
    provider: row.provider,
    providerEventId: row.provider_event_id,
    type: row.type,
    status: row.status,
    occurredAt: row.occurred_at,
    receivedAt: row.received_at,
    detail: row.detail ? (JSON.parse(row.detail) as Record<string, unknown>) : {},
  }))
}

/**
 * Retention of the provider events that matched no notification: deletes the
 * oldest received before `before`, at most `limit`, by primary key from a
 * LIMITed search on the partial index `delivery_events_orphans`. An event
 * about a notification goes with the notification's row
 * (src/notifications/prune.ts), so the index holds only these. The
 * suppressions they caused stay. Parameters: before, limit.
 */
export function pruneDeliveryEvents(db: D1Database, before: string, limit: number): D1PreparedStatement {
  return db
    .prepare(
      `DELETE FROM delivery_events WHERE (provider, provider_event_id) IN
         (SELECT provider, provider_event_id FROM delivery_events INDEXED BY delivery_events_orphans
          WHERE notification_id IS NULL AND received_at < ?1 ORDER BY received_at LIMIT ?2)`,
    )
    .bind(before, limit)
}
