import { env } from 'cloudflare:workers'
import { beforeAll, describe, expect, it } from 'vitest'
import { GroupCommit } from '../src/d1/group-commit.ts'
import { countRoundTrips } from '../src/metrics/round-trips.ts'

const insert = (db: D1Database, id: string) => db.prepare('INSERT INTO mark_writer_test (id) VALUES (?1)').bind(id)
const touch = (db: D1Database, id: string) =>
  db.prepare('UPDATE mark_writer_test SET touched = touched + 1 WHERE id = ?1').bind(id)

/** Tallies applied as one statement: each id's `tallied` goes up once per tally that names it. */
const tally = (db: D1Database) => (ids: readonly string[]) =>
  ids.length === 0
    ? []
    : [
        db
          .prepare(
            'UPDATE mark_writer_test SET tallied = tallied + (SELECT count(*) FROM json_each(?1) j WHERE j.value = mark_writer_test.id) WHERE id IN (SELECT value FROM json_each(?1))',
          )
          .bind(JSON.stringify(ids)),
      ]

async function rows(): Promise<{ id: string; touched: number }[]> {
  const { results } = await env.DB.prepare('SELECT id, touched FROM mark_writer_test ORDER BY id').all<{
    id: string
    touched: number
  }>()
  return results
}

describe('GroupCommit (the dispatch marks, group commit)', () => {
  beforeAll(async () => {
    await env.DB.exec(
      'CREATE TABLE IF NOT EXISTS mark_writer_test (id TEXT PRIMARY KEY, touched INTEGER NOT NULL DEFAULT 0, tallied INTEGER NOT NULL DEFAULT 0)',
    )
  })

  it('marks that arrive while a write is in flight go together in the next batch; each caller gets its own results', async () => {
    await env.DB.exec("DELETE FROM mark_writer_test; INSERT INTO mark_writer_test (id) VALUES ('a'), ('b')")
    const { db, roundTrips } = countRoundTrips(env.DB)
    const writer = new GroupCommit(db)
    const [first, second, third] = await Promise.all([
      writer.write([touch(db, 'a')]),
      writer.write([touch(db, 'b'), touch(db, 'b')]),
      writer.write([touch(db, 'missing')]),
    ])
    // The first goes at once; the two that came while it was in flight share one batch.
    expect(roundTrips()).toBe(2)
    expect(first?.map((result) => result.meta.changes)).toEqual([1])
    expect(second?.map((result) => result.meta.changes)).toEqual([1, 1])
    expect(third?.map((result) => result.meta.changes)).toEqual([0])
    expect(await rows()).toEqual([
      { id: 'a', touched: 1 },
      { id: 'b', touched: 2 },
    ])
  })

  it('a group with a mark that cannot be written: the others are written, only its own caller sees the error', async () => {
    await env.DB.exec("DELETE FROM mark_writer_test; INSERT INTO mark_writer_test (id) VALUES ('taken')")
    const { db, roundTrips } = countRoundTrips(env.DB)
    const writer = new GroupCommit(db)
    const results = await Promise.allSettled([
      writer.write([insert(db, 'one')]),
      writer.write([insert(db, 'two')]),
      writer.write([insert(db, 'taken')]), // the primary key exists: this one always fails
      writer.write([insert(db, 'three')]),
    ])
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled'])
    expect((await rows()).map((row) => row.id)).toEqual(['one', 'taken', 'three', 'two'].sort())
    // 'one' alone; the group of three fails as a whole and is written again one by one.
    expect(roundTrips()).toBe(1 + 1 + 3)
  })

  it('a write D1 refused as locked is tried again, not lost; one locked for good, and any other failure, goes to its caller', async () => {
    await env.DB.exec("DELETE FROM mark_writer_test; INSERT INTO mark_writer_test (id) VALUES ('a'), ('b')")
    // The real database, refusing its next batches as SQLite does when another connection holds the lock.
    let lockedFor = 2
    let batches = 0
    const db = new Proxy(env.DB, {
      get(target, property) {
        if (property !== 'batch') return Reflect.get(target, property).bind(target)
        return (statements: D1PreparedStatement[]) => {
          batches += 1
          if (lockedFor > 0) {
            lockedFor -= 1
            return Promise.reject(new Error('D1_ERROR: database is locked: SQLITE_BUSY'))
          }
          return target.batch(statements)
        }
      },
    })
    const writer = new GroupCommit(db)
    const [marked] = await writer.write([touch(db, 'a')])
    expect(marked?.meta.changes).toBe(1)
    expect(batches).toBe(3)
    expect(await rows()).toEqual([
      { id: 'a', touched: 1 },
      { id: 'b', touched: 0 },
    ])

    lockedFor = 10
    batches = 0
    await expect(writer.write([touch(db, 'b')])).rejects.toThrow(/SQLITE_BUSY/)
    // The first try and three more, then the caller is told (its mark fails as before).
    expect(batches).toBe(4)
    expect((await rows()).find((row) => row.id === 'b')?.touched).toBe(0)
  })

  it("a group's tallies are applied in its transaction, one set for the group; a caller written alone applies its own", async () => {
    await env.DB.exec(
      "DELETE FROM mark_writer_test; INSERT INTO mark_writer_test (id) VALUES ('a'), ('b'), ('c'), ('taken')",
    )
    const db = env.DB
    const writer = new GroupCommit<string>(db, tally(db))
    await Promise.all([writer.write([touch(db, 'a')], ['a']), writer.write([touch(db, 'b')], ['b'])])
    const [c, d] = await Promise.all([writer.write([touch(db, 'c')], ['c']), writer.write([touch(db, 'c')], ['c'])])
    // Each caller sees the results of its own statements, not the tally's.
    expect(c?.map((result) => result.meta.changes)).toEqual([1])
    expect(d?.map((result) => result.meta.changes)).toEqual([1])
    const settled = await Promise.allSettled([
      writer.write([touch(db, 'a')], ['a']),
      writer.write([touch(db, 'b')], ['b']),
      writer.write([insert(db, 'taken')], ['taken']), // always fails: its tally goes with it
    ])
    expect(settled.map((result) => result.status)).toEqual(['fulfilled', 'fulfilled', 'rejected'])
    const { results } = await env.DB.prepare('SELECT id, tallied FROM mark_writer_test ORDER BY id').all()
    expect(results).toEqual([
      { id: 'a', tallied: 2 },
      { id: 'b', tallied: 2 },
      { id: 'c', tallied: 2 },
      { id: 'taken', tallied: 0 },
    ])
  })
})
