/**
 * `notify-edge shards grow` against a real `wrangler dev` that binds two D1
 * databases and holds (DB_SHARDS=1, DB_SHARDS_GROWING_TO=2): the rows the one
 * database holds, seeded as the pipeline writes them, end in their
 * recipients' shards of two, and a change asked for meanwhile is refused.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { after, before, test } from 'node:test'
import { promisify } from 'node:util'
import { assertNoLeaks, watchOutput } from '../../support/child-output.ts'
import { type LocalWorker, startLocalWorker } from '../../support/local-worker.ts'
import { twoDatabaseConfig } from '../../support/two-databases.ts'

const run = promisify(execFile)
const ADMIN = 'grow-test-admin-token-0123456789'
let worker: LocalWorker
let config: ReturnType<typeof twoDatabaseConfig>

let printed = ''
watchOutput('the CLI', () => printed)

/** The shard of two a user's rows belong to: the first two bytes of their id's sha256, modulo 1,024, modulo 2. */
const shardOf = (userId: string) => (createHash('sha256').update(userId).digest().readUInt16BE(0) % 1024) % 2

before(async () => {
  config = twoDatabaseConfig()
  worker = await startLocalWorker(
    { ADMIN_TOKEN: ADMIN, INGEST_TOKEN: 'grow-test-ingest-token-0123456789', DB_SHARDS_GROWING_TO: '2' },
    { config: config.path, databases: ['DB', 'DB_1'] },
  )
})

after(async () => {
  await worker?.stop()
  config?.remove()
  assertNoLeaks()
})

test('shards grow moves each contact and preference to its shard of two, and changes wait meanwhile', async () => {
  const users = Array.from({ length: 12 }, () => crypto.randomUUID())
  const now = new Date().toISOString()
  // The hold was first seen long ago: no invocation from before it is still writing.
  await worker.query("INSERT INTO shard_grows (to_count, held_at) VALUES (2, '2026-01-01T00:00:00.000Z')")
  await worker.query(
    `INSERT INTO contacts (user_id, email, version, updated_at) VALUES ${users
      .map((user, index) => `('${user}', 'grow-${index}@example.com', 1, '${now}')`)
      .join(', ')}`,
  )
  await worker.query(
    `INSERT INTO preferences (user_id, kind, channel, enabled, source, updated_at) VALUES ${users
      .map((user) => `('${user}', 'ResponseCreated', 'email', 0, 'api', '${now}')`)
      .join(', ')}`,
  )

  const refused = await worker.api('PUT', `/v1/preferences/${users[0]}`, ADMIN, {
    preferences: [{ kind: 'ResponseCreated', channel: 'email', enabled: true }],
  })
  assert.equal(refused.status, 503)
  assert.equal((refused.body.error as { code: string }).code, 'SHARDS_GROWING')

  const { stdout, stderr } = await run(
    process.execPath,
    ['bin/notify-edge.ts', 'shards', 'grow', '--to', '2', '--limit', '5', '--json'],
    { env: { ...process.env, NOTIFY_EDGE_URL: worker.url, NOTIFY_EDGE_TOKEN: ADMIN } },
  )
  printed += stdout + stderr
  const moving = users.filter((user) => shardOf(user) === 1)
  const result = JSON.parse(stdout) as { copied: Record<string, number> }
  assert.equal(result.copied.contacts ?? 0, moving.length)
  assert.equal(result.copied.preferences ?? 0, moving.length)

  for (const [binding, expected] of [
    ['DB', users.filter((user) => shardOf(user) === 0)],
    ['DB_1', moving],
  ] as const) {
    const contacts = await worker.query(
      `SELECT user_id FROM contacts WHERE user_id IN (${users.map((user) => `'${user}'`).join(', ')})`,
      binding,
    )
    assert.deepEqual(contacts.map((row) => row.user_id).sort(), [...expected].sort(), `contacts in ${binding}`)
    const preferences = await worker.query(
      `SELECT user_id FROM preferences WHERE user_id IN (${users.map((user) => `'${user}'`).join(', ')})`,
      binding,
    )
    assert.deepEqual(preferences.map((row) => row.user_id).sort(), [...expected].sort(), `preferences in ${binding}`)
  }
})
