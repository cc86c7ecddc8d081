import type { Sql, TransactionSql } from 'postgres'

/** An outbox row as claimed: its id, body (NULL without a data row) and when it was written. */
export type OutboxRow = { message_id: string; message_body: Buffer | null; created_at: Date }

/**
 * Claims up to `limit` untransferred rows, oldest first, locking them so that
 * other bridge instances skip them (FOR UPDATE SKIP LOCKED). The body is the
 * first data row of the message, NULL when it has none.
 * Parameters: schema, limit.
 */
export function claimOutboxBatch(tx: TransactionSql, schema: string, limit: number) {
  return tx<OutboxRow[]>`
    SELECT l.message_id, l.created_at,
           (SELECT d.message_body FROM ${tx(schema)}.message_queue_log_data d
             WHERE d.message_id = l.message_id LIMIT 1) AS message_body
    FROM ${tx(schema)}.message_queue_log l
    WHERE l.transferred IS NOT TRUE
    ORDER BY l.created_at, l.message_id
    LIMIT ${limit}
    FOR UPDATE OF l SKIP LOCKED`
}

/** Marks claimed rows transferred, in the claiming transaction. Parameters: schema, message ids. */
export function markTransferred(tx: TransactionSql, schema: string, ids: readonly string[]) {
  return tx`
    UPDATE ${tx(schema)}.message_queue_log
    SET transferred = true, transfer_time = now()
    WHERE message_id = ANY(${ids as string[]}::uuid[])`
}

/** Untransferred rows, for the gauge. Parameters: schema. */
export async function countUntransferred(sql: Sql, schema: string): Promise<number> {
  const [row] = await sql<{ count: string }[]>`
    SELECT count(*) FROM ${sql(schema)}.message_queue_log WHERE transferred IS NOT TRUE`
  return Number(row?.count ?? 0)
}
