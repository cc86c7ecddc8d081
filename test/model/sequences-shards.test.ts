import { afterEach, describe, expect, it } from 'vitest'
import { allRows } from '../shards.ts'
import { deliver, emit, failD1, play } from './commands.ts'
import { World } from './world.ts'

/**
 * The sequences the lifecycle model found only with the recipients spread
 * over two D1 databases (DB_SHARDS=2), played in that world: this file runs
 * in the two databases project alone. Each failed on the code before its fix.
 */

let world: World | undefined

afterEach(() => {
  world?.close()
  world = undefined
})

describe('guarantees where features meet, across two D1 shards', () => {
  // Found by the model (npm run model -- --runs 1000 --databases 2, seed 1201531680, run 827): the binding took
  // a verification decision's email and the dispatch's D1 call that marks it failed. The binding's delivery
  // event, which names the email by its Message-ID only, found no notification with that provider id in any
  // shard and was recorded in the primary; the notification, in the other shard, turned unknown, found no
  // event in its own shard, and was sent a second time.
  it("the binding's delivery event for an email whose mark failed settles it in its own shard: one email", async () => {
    // Person 0 in the shard that is not the primary: the event was recorded in the primary, away from it.
    world = new World('cloudflare', { vars: { CIRCUIT_FAILURES: '5' }, shards: [1] })
    const violations = await play(world, [
      emit('authoritative', 0, 0),
      // The fifth D1 call from here is the dispatch's mark of the accepted send.
      failD1(5),
      deliver('EVENTS'),
      deliver('DISPATCH'),
    ])
    expect(violations).toEqual([])
    const rows = await allRows<{ id: string; status: string; status_reason: string | null }>(
      "SELECT id, status, status_reason FROM notifications WHERE channel = 'email'",
    )
    expect(rows).toHaveLength(1)
    const [row] = rows
    // The mark did fail: the send's outcome turned unknown, and the delivery event settled it.
    expect(world.waits.some((wait) => wait.id === row?.id)).toBe(true)
    expect(row).toMatchObject({
      status: 'sent',
      status_reason: 'a delivery event had named its message: the send had gone out',
    })
    expect(world.emails().filter((email) => email.notificationId === row?.id)).toHaveLength(1)
  })
})
