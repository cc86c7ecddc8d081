/**
 * The PostgreSQL outbox relay against the real PostgreSQL of this machine, a
 * database per test, and a local HTTP server standing in for the Worker's
 * ingest route that records what it accepts.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { after, test } from 'node:test'
import { startBridge } from '../../support/bridge-process.ts'
import { assertNoLeaks } from '../../support/child-output.ts'
import { freshDatabase, transferredCount, writeRows } from '../../support/postgres.ts'
import { recordingSink } from '../../support/recording-sink.ts'
import { freePort, waitFor } from '../../support/wait.ts'

const cleanups: (() => Promise<unknown>)[] = []
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
})

async function setup() {
  const db = await freshDatabase()
  cleanups.push(() => db.drop())
  const sink = await recordingSink()
  cleanups.push(() => sink.close())
  return { db, sink }
}

async function bridge(env: Record<string, string>) {
  const started = await startBridge(env)
  cleanups.push(() => started.stop())
  await started.ready()
  return started
}

function assertOnce(ids: string[], expected: string[]) {
  assert.equal(new Set(ids).size, ids.length, 'an event was forwarded twice')
  assert.deepEqual([...ids].sort(), [...expected].sort())
}

test('1,000 rows written by 4 concurrent writers are forwarded exactly once and all marked transferred; SIGTERM exits 0', async () => {
  const { db, sink } = await setup()
  const relay = await bridge({ PG_URL: db.url, SINK_URL: sink.url })
  const ids = await writeRows(db.sql, 1000, 4)
  await waitFor(async () => ((await transferredCount(db.sql)) === 1000 ? true : undefined), 'all rows transferred')
  assertOnce(sink.ids(), ids)
  const event = sink.accepted[0]
  assert.equal(event?.source, 'postgres')
  assert.match(event?.origin ?? '', /^postgres:data_exchange\.message_queue_log\/[0-9a-f-]{36}$/)
  assert.ok(sink.requests.every((request) => request.count <= 100))
  const metrics = await relay.metrics()
  assert.match(metrics, /bridge_events_forwarded_total\{source="postgres"\} 1000/)
  assert.deepEqual(await relay.stop(), { code: 0, signal: null })
})

test('two bridge processes on one outbox never forward a message twice', async () => {
  const { db, sink } = await setup()
  await bridge({ PG_URL: db.url, SINK_URL: sink.url, PG_BATCH_SIZE: '20' })
  await bridge({ PG_URL: db.url, SINK_URL: sink.url, PG_BATCH_SIZE: '20' })
  const ids = await writeRows(db.sql, 600, 3)
  await waitFor(async () => ((await transferredCount(db.sql)) === 600 ? true : undefined), 'all rows transferred')
  assertOnce(sink.ids(), ids)
})

test('sink refusing connections, then answering 503: nothing is marked before it accepts, then everything arrives', async () => {
  const db = await freshDatabase()
  cleanups.push(() => db.drop())
  const port = await freePort()
  const relay = await bridge({ PG_URL: db.url, SINK_URL: `http://127.0.0.1:${port}/v1/ingest` })
  const ids = await writeRows(db.sql, 50)
  await waitFor(
    async () => (/bridge_sink_errors_total\{status="network"\} [2-9]/.test(await relay.metrics()) ? true : undefined),
    'refused connections',
  )
  assert.equal(await transferredCount(db.sql), 0)

  const sink = await recordingSink(port)
  cleanups.push(() => sink.close())
  sink.setMode('fail503')
  await waitFor(
    () => (sink.requests.filter((r) => r.status === 503).length >= 3 ? true : undefined),
    'three 503 answers',
    60_000,
  )
  assert.equal(await transferredCount(db.sql), 0)
  assert.equal((await fetch(`http://127.0.0.1:${relay.port}/readyz`)).status, 503)

  sink.setMode('accept')
  await waitFor(
    async () => ((await transferredCount(db.sql)) === 50 ? true : undefined),
    'all rows transferred',
    60_000,
  )
  assertOnce(sink.ids(), ids)
  await waitFor(
    async () => ((await fetch(`http://127.0.0.1:${relay.port}/readyz`)).status === 200 ? true : undefined),
    'ready again',
  )
})

test('the Worker down with idle_in_transaction_session_timeout = 5s: no bridge connection sits in a transaction, claims are renewed, everything arrives after', async () => {
  const { db, sink } = await setup()
  const database = db.url.slice(db.url.lastIndexOf('/') + 1)
  // As a DBA would set it: a session idle in a transaction for 5 s is killed.
  await db.sql.unsafe(`ALTER DATABASE ${database} SET idle_in_transaction_session_timeout = '5s'`)
  sink.setMode('fail503')
  await bridge({ PG_URL: db.url, SINK_URL: sink.url, PG_LEASE_MS: '3000' })
  const ids = await writeRows(db.sql, 250, 2)
  const started = Date.now()
  const seen = { samples: 0, inTransaction: 0 }
  // Sample the bridge's sessions for 15 s of outage: three times the timeout, five leases.
  await waitFor(
    async () => {
      const sessions = await db.sql<{ state: string | null }[]>`
        SELECT state FROM pg_stat_activity
        WHERE datname = ${database} AND application_name = 'notify-edge-bridge'`
      seen.samples += 1
      for (const session of sessions) if (session.state?.startsWith('idle in transaction')) seen.inTransaction += 1
      return Date.now() - started > 15_000 ? true : undefined
    },
    'fifteen seconds of outage',
    60_000,
  )
  assert.ok(seen.samples > 50, `only ${seen.samples} samples`)
  assert.equal(seen.inTransaction, 0, 'a bridge session sat idle in a transaction')
  assert.equal(await transferredCount(db.sql), 0)
  // The claims outlived their 3 s lease by renewal: nobody else could have taken them.
  const [claims] = await db.sql<{ claimed: number; live: number }[]>`
    SELECT count(*)::int AS claimed, count(*) FILTER (WHERE claimed_until > now())::int AS live
    FROM data_exchange.message_queue_log WHERE claim_token IS NOT NULL`
  assert.ok((claims?.claimed ?? 0) > 0 && claims?.live === claims?.claimed, JSON.stringify(claims))

  sink.setMode('accept')
  await waitFor(async () => ((await transferredCount(db.sql)) === 250 ? true : undefined), 'all rows after the outage')
  assertOnce(sink.ids(), ids)
})

test('pg_terminate_backend on the LISTEN and the claiming connections: the bridge reconnects and rows written meanwhile arrive', async () => {
  const { db, sink } = await setup()
  await bridge({ PG_URL: db.url, SINK_URL: sink.url, PG_SWEEP_INTERVAL_MS: '60000' })
  const first = await writeRows(db.sql, 10)
  await waitFor(async () => ((await transferredCount(db.sql)) === 10 ? true : undefined), 'first rows')
  const database = db.url.slice(db.url.lastIndexOf('/') + 1)
  const killed = await db.sql<{ pid: number }[]>`
    SELECT pid FROM pg_stat_activity WHERE datname = ${database} AND application_name = 'notify-edge-bridge'`
  assert.ok(killed.length >= 2, `expected the LISTEN and a claiming connection, found ${killed.length}`)
  await db.sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
               WHERE datname = ${database} AND application_name = 'notify-edge-bridge'`
  const second = await writeRows(db.sql, 25, 5)
  // The sweep interval is a minute: these arrive through the re-LISTEN and the sweep after reconnecting.
  await waitFor(
    async () => ((await transferredCount(db.sql)) === 35 ? true : undefined),
    'rows written while disconnected',
  )
  assertOnce(sink.ids(), [...first, ...second])
})

test('the bridge SIGKILLed in the middle of a batch: its claim expires, a restarted bridge takes the batch over, nothing is lost', async () => {
  const { db, sink } = await setup()
  sink.setMode('stall')
  const first = await bridge({ PG_URL: db.url, SINK_URL: sink.url, PG_LEASE_MS: '2000' })
  const ids = await writeRows(db.sql, 30)
  await waitFor(() => (sink.requests.length > 0 ? true : undefined), 'a batch in flight')
  assert.deepEqual(await first.kill(), { code: null, signal: 'SIGKILL' })
  assert.equal(await transferredCount(db.sql), 0)
  const [{ claimed } = { claimed: 0 }] = await db.sql<{ claimed: number }[]>`
    SELECT count(*)::int AS claimed FROM data_exchange.message_queue_log WHERE claim_token IS NOT NULL`
  assert.ok(claimed > 0, 'the killed bridge held a claim')

  sink.setMode('accept')
  await bridge({ PG_URL: db.url, SINK_URL: sink.url, PG_LEASE_MS: '2000' })
  await waitFor(async () => ((await transferredCount(db.sql)) === 30 ? true : undefined), 'all rows after restart')
  assert.deepEqual([...new Set(sink.ids())].sort(), [...ids].sort())
})

test('PG_MODE=poll delivers without the trigger', async () => {
  const { db, sink } = await setup()
  await db.sql`DROP TRIGGER message_queue_log_notify ON data_exchange.message_queue_log`
  await bridge({ PG_URL: db.url, SINK_URL: sink.url, PG_MODE: 'poll', PG_SWEEP_INTERVAL_MS: '100' })
  const ids = await writeRows(db.sql, 40, 2)
  await waitFor(async () => ((await transferredCount(db.sql)) === 40 ? true : undefined), 'all rows polled')
  assertOnce(sink.ids(), ids)
})

test('an outbox row committed before its data row: it waits for the data, rows behind it go on, and it is forwarded with its body once the data row commits', async () => {
  const { db, sink } = await setup()
  await bridge({ PG_URL: db.url, SINK_URL: sink.url })
  const early = crypto.randomUUID()
  // The producer commits the outbox row in one transaction, its data in a later one.
  await db.sql`INSERT INTO data_exchange.message_queue_log (message_id) VALUES (${early})`
  const behind = await writeRows(db.sql, 20)
  // Rows written after it were claimed and forwarded: the relay has swept past the early row.
  await waitFor(async () => {
    const [{ count } = { count: 0 }] = await db.sql<{ count: number }[]>`
      SELECT count(*)::int AS count FROM data_exchange.message_queue_log
      WHERE transferred AND message_id = ANY(${behind}::uuid[])`
    return count === behind.length ? true : undefined
  }, 'the rows behind it')
  assert.equal(
    sink.accepted.some((event) => event.sourceMessageId === early),
    false,
    'the row was forwarded before its data row existed',
  )
  const [row] = await db.sql<{ transferred: boolean | null }[]>`
    SELECT transferred FROM data_exchange.message_queue_log WHERE message_id = ${early}`
  assert.notEqual(row?.transferred, true, 'the row was marked transferred before its data row existed')

  const body = JSON.stringify({ envelope: { eventId: early, eventType: 'response.created' } })
  await db.sql`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body) VALUES (${early}, ${Buffer.from(body)})`
  await waitFor(
    async () => ((await transferredCount(db.sql)) === 21 ? true : undefined),
    'the early row, once its data is there',
  )
  const forwarded = sink.accepted.filter((event) => event.sourceMessageId === early)
  assert.equal(forwarded.length, 1)
  assert.equal(forwarded[0]?.body, body)
  assert.equal(forwarded[0]?.headers['x-outbox-problem'], undefined)
  assertOnce(sink.ids(), [early, ...behind])
})

test('a row whose data row never comes (after PG_DATA_WAIT_MS), and one whose body is not UTF-8, are forwarded (base64), never skipped', async () => {
  const { db, sink } = await setup()
  await bridge({ PG_URL: db.url, SINK_URL: sink.url, PG_DATA_WAIT_MS: '1000' })
  const missing = crypto.randomUUID()
  const binary = crypto.randomUUID()
  await db.sql`INSERT INTO data_exchange.message_queue_log (message_id) VALUES (${missing})`
  await db.sql.begin(async (tx) => {
    await tx`INSERT INTO data_exchange.message_queue_log (message_id) VALUES (${binary})`
    await tx`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body) VALUES (${binary}, ${Buffer.from([0xff, 0xfe, 0x00, 0x41])})`
  })
  await waitFor(async () => ((await transferredCount(db.sql)) === 2 ? true : undefined), 'both rows')
  const byId = new Map(sink.accepted.map((event) => [event.sourceMessageId, event]))
  assert.deepEqual(byId.get(missing)?.encoding, 'base64')
  assert.equal(byId.get(missing)?.body, '')
  assert.equal(byId.get(missing)?.headers['x-outbox-problem'], 'no message_queue_log_data row after 1000 ms')
  assert.equal(byId.get(binary)?.encoding, 'base64')
  assert.deepEqual(Buffer.from(byId.get(binary)?.body ?? '', 'base64'), Buffer.from([0xff, 0xfe, 0x00, 0x41]))
})

test('a bad variable: non-zero exit and a message naming it', () => {
  const result = spawnSync(process.execPath, ['bridge/src/main.ts'], {
    env: { PATH: process.env.PATH, PG_MODE: 'sometimes', PG_BATCH_SIZE: 'many' },
    encoding: 'utf8',
  })
  assert.notEqual(result.status, 0)
  assert.match(result.stderr, /PG_MODE/)
  assert.match(result.stderr, /PG_BATCH_SIZE/)
})

test('npm run migrate:pg on a database that already holds the seed tables and rows loses nothing', async () => {
  const { default: postgres } = await import('postgres')
  const { PG_ADMIN_URL } = await import('../../support/postgres.ts')
  const { migratePostgres } = await import('../src/migrate.ts')
  const name = `notify_edge_seed_${crypto.randomUUID().replaceAll('-', '').slice(0, 10)}`
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} })
  await admin.unsafe(`CREATE DATABASE ${name}`)
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`)
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    // The seed's schema, verbatim, with rows in it.
    await sql.unsafe(`CREATE SCHEMA IF NOT EXISTS data_exchange;
      CREATE TABLE IF NOT EXISTS data_exchange.message_queue_log (message_id UUID PRIMARY KEY, transferred BOOLEAN DEFAULT FALSE, transfer_time TIMESTAMP);
      CREATE TABLE IF NOT EXISTS data_exchange.message_queue_log_data (message_id UUID REFERENCES data_exchange.message_queue_log(message_id), message_body BYTEA);
      INSERT INTO data_exchange.message_queue_log VALUES ('11111111-1111-4111-8111-111111111111', true, '2026-01-01'), ('22222222-2222-4222-8222-222222222222', false, NULL);
      INSERT INTO data_exchange.message_queue_log_data VALUES ('11111111-1111-4111-8111-111111111111', 'a'), ('22222222-2222-4222-8222-222222222222', 'b');`)
    assert.deepEqual(await migratePostgres(url), ['0001_outbox.sql', '0002_claims.sql'])
    assert.deepEqual(await migratePostgres(url), ['0001_outbox.sql', '0002_claims.sql'])
    const rows =
      await sql`SELECT l.message_id, l.transferred, l.transfer_time, d.message_body FROM data_exchange.message_queue_log l
      JOIN data_exchange.message_queue_log_data d USING (message_id) ORDER BY l.message_id`
    assert.equal(rows.length, 2)
    assert.equal(rows[0]?.transferred, true)
    assert.equal(Buffer.from(rows[1]?.message_body).toString(), 'b')
    const [trigger] = await sql`SELECT tgname FROM pg_trigger WHERE tgname = 'message_queue_log_notify'`
    assert.ok(trigger)
  } finally {
    await sql.end({ timeout: 1 })
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end({ timeout: 1 })
  }
})

// Nothing the child processes of this file printed may carry personal data.
after(() => assertNoLeaks())
