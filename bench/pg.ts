/** `npm run bench`: the PostgreSQL outbox relay. */
import type postgres from 'postgres'
import { claimOutboxBatch, markTransferred } from '../bridge/src/sources/postgres/sql.ts'
import { startBridge } from '../support/bridge-process.ts'
import { freshDatabase, transferredCount } from '../support/postgres.ts'
import { recordingSink } from '../support/recording-sink.ts'
import { N, progress, rate, ratio, relayRate, results } from './lib.ts'

async function fillOutbox(sql: postgres.Sql, count: number) {
  await sql`TRUNCATE data_exchange.message_queue_log_data, data_exchange.message_queue_log`
  await sql`INSERT INTO data_exchange.message_queue_log (message_id, created_at)
            SELECT gen_random_uuid(), now() + make_interval(secs => g / 1000.0) FROM generate_series(1, ${count}) g`
  await sql`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body)
            SELECT message_id, convert_to('{"envelope":{"eventId":"' || message_id || '"},"data":{}}', 'UTF8')
            FROM data_exchange.message_queue_log`
  await sql`VACUUM ANALYZE data_exchange.message_queue_log`
}

/** The outbox relay beside the per-message algorithm it replaces and its own claim-and-mark ceiling. */
export async function benchPostgres() {
  const db = await freshDatabase()
  const sink = await recordingSink()
  try {
    progress(`pg_relay: claim-and-mark ceiling over ${N.pg} rows (the relay's own claim and mark statements)`)
    await fillOutbox(db.sql, N.pg)
    let start = performance.now()
    for (;;) {
      const token = crypto.randomUUID()
      const rows = await claimOutboxBatch(db.sql, 'data_exchange', token, 30_000, 100, 60_000)
      if (rows.length === 0) break
      const ids = rows.map((row) => row.message_id)
      await markTransferred(
        db.sql,
        'data_exchange',
        token,
        ids,
        ids.map(() => 'event'),
      )
    }
    const claimOnly = rate(N.pg, performance.now() - start)

    progress(
      `pg_relay: the PushOccurrence algorithm (one transaction and one forward per message) over ${N.pgBaseline} rows`,
    )
    await fillOutbox(db.sql, N.pgBaseline)
    const ids = (await db.sql`SELECT message_id FROM data_exchange.message_queue_log ORDER BY created_at`).map(
      (row) => row.message_id as string,
    )
    start = performance.now()
    for (const id of ids) {
      await db.sql.begin(async (tx) => {
        const [row] = await tx`SELECT l.message_id, d.message_body FROM data_exchange.message_queue_log l
                               JOIN data_exchange.message_queue_log_data d USING (message_id)
                               WHERE l.message_id = ${id} FOR UPDATE OF l SKIP LOCKED`
        if (!row) return
        const event = {
          source: 'postgres',
          origin: `postgres:${id}`,
          sourceMessageId: id,
          receivedAt: new Date().toISOString(),
          headers: {},
          body: Buffer.from(row.message_body).toString(),
        }
        const response = await fetch(sink.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ events: [event] }),
        })
        await response.text()
        await tx`UPDATE data_exchange.message_queue_log SET transferred = true, transfer_time = now() WHERE message_id = ${id}`
      })
    }
    const perMessage = rate(N.pgBaseline, performance.now() - start)

    progress(`pg_relay: the bridge over ${N.pg} rows`)
    await fillOutbox(db.sql, N.pg)
    sink.accepted.length = 0
    const relay = await startBridge({ PG_URL: db.url, SINK_URL: sink.url, LOG_LEVEL: 'warn' })
    const bridge = await relayRate('postgres', relay, sink, N.pg, async () => (await transferredCount(db.sql)) >= N.pg)
    await relay.stop()
    results.pg_relay = {
      msgs_per_s: bridge,
      per_message_baseline_msgs_per_s: perMessage,
      claim_only_msgs_per_s: claimOnly,
      of_claim_only: ratio('pg_relay / claim-only', bridge, claimOnly, 75),
      rows: N.pg,
    }
  } finally {
    await sink.close()
    await db.drop()
  }
}
