import type { Sql } from 'postgres'

/** An outbox row as claimed: its id, body (NULL without a data row) and when it was written. */
export type OutboxRow = { message_id: string; message_body: Buffer | null; created_at: Date }

/**
 * Claims up to `limit` untransferred rows that nobody holds (no claim, or an
 * expired one), oldest first, for `leaseMs`: one short statement, committed at
 * once, so no transaction stays open while they are forwarded. SKIP LOCKED
 * keeps concurrent claimers (other loops, other bridges) apart. The body is
 * the first data row of the message, NULL when it has none.
 *
 * A row whose data row is not there yet (a producer that commits the outbox
 * row before the data it refers to) is not claimed until it is, or until the
 * row is `dataWaitMs` old: it is passed over, so the rows behind it go on, and
 * the next sweep looks again. Only after that wait does it travel without a body.
 * Parameters: schema, claim token, lease in milliseconds, limit, data wait in milliseconds.
 */
export async function claimOutboxBatch(
  sql: Sql,
  schema: string,
  token: string,
  leaseMs: number,
  limit: number,
  dataWaitMs: number,
): Promise<OutboxRow[]> {
  const rows = await sql<OutboxRow[]>`
    WITH candidates AS (
      SELECT l.message_id FROM ${sql(schema)}.message_queue_log l
      WHERE l.transferred IS NOT TRUE AND (l.claimed_until IS NULL OR l.claimed_until < now())
        AND (EXISTS (SELECT 1 FROM ${sql(schema)}.message_queue_log_data d WHERE d.message_id = l.message_id)
             OR l.created_at <= now() - ${dataWaitMs} * interval '1 millisecond')
      ORDER BY l.created_at, l.message_id
      LIMIT ${limit}
      FOR UPDATE OF l SKIP LOCKED
    )
    UPDATE ${sql(schema)}.message_queue_log l
    SET claim_token = ${token}, claimed_until = now() + ${leaseMs} * interval '1 millisecond'
    FROM candidates c
    WHERE l.message_id = c.message_id
    RETURNING l.message_id, l.created_at,
              (SELECT d.message_body FROM ${sql(schema)}.message_queue_log_data d
                WHERE d.message_id = l.message_id LIMIT 1) AS message_body`
  // RETURNING has no order: forward oldest first.
  return [...rows].sort(
    (a, b) => a.created_at.getTime() - b.created_at.getTime() || (a.message_id < b.message_id ? -1 : 1),
  )
}

/**
 * Extends a claim that is still being forwarded. Parameters: schema, claim token, lease in milliseconds.
 * Returns how many rows the claim still holds.
 */
export async function renewClaim(sql: Sql, schema: string, token: string, leaseMs: number): Promise<number> {
  const result = await sql`
    UPDATE ${sql(schema)}.message_queue_log
    SET claimed_until = now() + ${leaseMs} * interval '1 millisecond'
    WHERE claim_token = ${token} AND transferred IS NOT TRUE`
  return result.count
}

/**
 * Marks claimed rows transferred, each with how it was forwarded (`event` or
 * `marker:<kind>`), only while the claim is still ours: a row another bridge
 * took over after our lease expired is left for it to mark.
 * Parameters: schema, claim token, message ids, forwarded-as per id. Returns the rows marked.
 */
export async function markTransferred(
  sql: Sql,
  schema: string,
  token: string,
  ids: readonly string[],
  forwardedAs: readonly string[],
): Promise<number> {
  const result = await sql`
    UPDATE ${sql(schema)}.message_queue_log l
    SET transferred = true, transfer_time = now(), forwarded_as = m.forwarded_as,
        claim_token = NULL, claimed_until = NULL
    FROM unnest(${ids as string[]}::uuid[], ${forwardedAs as string[]}::text[]) AS m(message_id, forwarded_as)
    WHERE l.message_id = m.message_id AND l.claim_token = ${token}`
  return result.count
}

/** Gives a claim back (the bridge is stopping), so that any bridge can take the rows at once. Parameters: schema, claim token. */
export async function releaseClaim(sql: Sql, schema: string, token: string): Promise<void> {
  await sql`
    UPDATE ${sql(schema)}.message_queue_log SET claim_token = NULL, claimed_until = NULL
    WHERE claim_token = ${token} AND transferred IS NOT TRUE`
}

/** Untransferred rows, for the gauge. Parameters: schema. */
export async function countUntransferred(sql: Sql, schema: string): Promise<number> {
  const [row] = await sql<{ count: string }[]>`
    SELECT count(*) FROM ${sql(schema)}.message_queue_log WHERE transferred IS NOT TRUE`
  return Number(row?.count ?? 0)
}
