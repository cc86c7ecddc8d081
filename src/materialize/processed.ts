import type { InboundEvent } from '../contracts/index.ts'
import { deleteOldest } from '../sql.ts'

/** An event as recorded in `processed_marks`. */
export type ProcessedEvent = {
  idempotencyKey: string
  eventId: string
  contract: string
  eventType: string
  kind: string | null
  traceId: string | null
  outcome: string
  inbound: InboundEvent
}

/**
 * The marks written before they were keyed by event (migration 0022): read
 * beside `processed_marks` until retention has drained them, never written.
 */
export const LEGACY_MARKS = 'processed_events'

/**
 * Records an event as processed by the run `runId`, kept in the row's `claim`
 * column, unless it already is — by its (event id, idempotency key), or by a
 * mark written before migration 0022 (then `meta.changes` is 0 and the row
 * keeps the first writer's run id). The batch's context reads the old marks
 * too (./context.ts), but an ignored event is recorded without it: the guard
 * keeps its redelivery from a second mark. Parameters: key, event id, contract, event type, source,
 * origin, source message id, outcome, received at, processed at, run id, kind, trace id.
 */
export function insertProcessedEvent(
  db: D1Database,
  row: ProcessedEvent,
  now: string,
  runId: string,
): D1PreparedStatement {
  const { inbound } = row
  return db
    .prepare(
      `INSERT INTO processed_marks
         (idempotency_key, event_id, contract, event_type, source, origin, source_message_id, outcome, received_at,
          processed_at, claim, kind, trace_id)
       SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13
       WHERE NOT EXISTS (SELECT 1 FROM ${LEGACY_MARKS} WHERE idempotency_key = ?1)
       ON CONFLICT (event_id, idempotency_key) DO NOTHING`,
    )
    .bind(
      row.idempotencyKey,
      row.eventId,
      row.contract,
      row.eventType,
      inbound.source,
      inbound.origin,
      inbound.sourceMessageId,
      row.outcome,
      inbound.receivedAt,
      now,
      runId,
      row.kind,
      row.traceId,
    )
}

/**
 * Deletes the oldest processed-event keys older than `before`, at most
 * `limit` of them (retention, a bounded chunk per cron run): past it, a
 * redelivery would be processed again, so the window must exceed any
 * redelivery. Parameters: before, limit.
 */
export function deleteProcessedEventsBefore(db: D1Database, before: string, limit: number): D1PreparedStatement {
  return deleteOldest(db, 'processed_marks', 'event_id, idempotency_key', 'processed_at', before, limit)
}

/** The same for the marks written before migration 0022, until none is left. Parameters: before, limit. */
export function deleteLegacyMarksBefore(db: D1Database, before: string, limit: number): D1PreparedStatement {
  return deleteOldest(db, LEGACY_MARKS, 'idempotency_key', 'processed_at', before, limit)
}
