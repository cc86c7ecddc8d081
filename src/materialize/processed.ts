import type { DecodedEvent, InboundEvent } from '../contracts/index.ts'

/** An event ready to be recorded in `processed_events`. */
export type ProcessedEvent = { inbound: InboundEvent; event: DecodedEvent; outcome: string }

/**
 * Records an event as processed unless its idempotency key already is.
 * `meta.changes` of the statement's result is 0 for a duplicate.
 * Parameters: idempotency key, event id, contract, event type, source, origin,
 * source message id, outcome, received at, processed at.
 */
export function insertProcessedEvent(db: D1Database, row: ProcessedEvent, now: string): D1PreparedStatement {
  const { inbound, event, outcome } = row
  return db
    .prepare(
      `INSERT INTO processed_events
         (idempotency_key, event_id, contract, event_type, source, origin, source_message_id, outcome, received_at, processed_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
       ON CONFLICT (idempotency_key) DO NOTHING`,
    )
    .bind(
      event.idempotencyKey,
      event.eventId,
      event.contract,
      event.eventType,
      inbound.source,
      inbound.origin,
      inbound.sourceMessageId,
      outcome,
      inbound.receivedAt,
      now,
    )
}

/**
 * Deletes processed-event keys older than `before` (retention): past it, a
 * redelivery would be processed again, so the window must exceed any redelivery.
 */
export function deleteProcessedEventsBefore(db: D1Database, before: string): D1PreparedStatement {
  return db.prepare('DELETE FROM processed_events WHERE processed_at < ?1').bind(before)
}
