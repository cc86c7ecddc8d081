/**
 * The send pace (src/dispatch/pace/): every send through resend takes a slot
 * from one Durable Object per account, shared by all consumer invocations, and
 * Resend's answers correct it. Against the fake's teams at Resend's documented
 * default of 5 requests per second (test/fake-resend.ts, a team of its own per
 * test), in the real Durable Object of wrangler.toml. What is asserted is what
 * happened — 429s the fake gave, attempts on rows, the slot times the object
 * handed out — never how fast.
 */
import { evictDurableObject, runInDurableObject } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { configOf } from '../src/config.ts'
import { reportOf } from '../src/dispatch/pace/answer.ts'
import { PACE_MAX_WAIT_MS, Pace, paceName } from '../src/dispatch/pace/client.ts'
import { CAREFUL_MS, type Slot, SlotBook, WINDOW_MS } from '../src/dispatch/pace/slots.ts'
import { paceFor } from '../src/dispatch/transports/index.ts'
import { resendTransport } from '../src/dispatch/transports/resend.ts'
import { createLogger } from '../src/log.ts'
import { FAKE_RESEND_TEAM_KEY_PREFIX, FAKE_RESEND_URL } from './fake-resend.ts'
import { dispatchOnce, guid, pendingNotification } from './helpers.ts'

type Row = { id: string; status: string; scheduled_at: string; send_attempts: number; status_reason: string | null }

/** A team of the fake at Resend's default rate that no other test uses, and the Worker's variables to send through it. */
function ownTeam(overrides: Record<string, string> = {}) {
  const apiKey = `${FAKE_RESEND_TEAM_KEY_PREFIX}${guid().slice(0, 8)}`
  const vars = {
    EMAIL_TRANSPORT: 'resend',
    RESEND_API_KEY: apiKey,
    RESEND_API_URL: FAKE_RESEND_URL,
    RESEND_REQUESTS_PER_SECOND: '5',
    ...overrides,
  }
  return { apiKey, vars }
}

async function paceOf(apiKey: string) {
  return env.SEND_PACE.getByName(await paceName(apiKey))
}

/** What the pace object keeps in its storage (the hold, the provider's limit). */
async function kept(apiKey: string): Promise<{ heldUntil?: number; limit?: number }> {
  return runInDurableObject(await paceOf(apiKey), (_, state) => ({
    heldUntil: state.storage.kv.get<number>('heldUntil'),
    limit: state.storage.kv.get<number>('limit'),
  }))
}

async function control(path: 'sends' | 'rate-limited', key: string): Promise<number> {
  return ((await (await fetch(`${FAKE_RESEND_URL}/control/${path}?key=${key}`)).json()) as { count: number }).count
}

async function rowOf(id: string): Promise<Row> {
  return (await env.DB.prepare(
    'SELECT id, status, scheduled_at, send_attempts, status_reason FROM notifications WHERE id = ?1',
  )
    .bind(id)
    .first<Row>()) as Row
}

/** Each notification's message in its own invocation, all at once: concurrent consumers of one account. */
function dispatchAll(ids: string[], vars: Record<string, string>) {
  return Promise.all(ids.map((id) => dispatchOnce({ notificationId: id }, vars)))
}

/** Slot starts, in order: no window of WINDOW_MS holds more than `perSecond` of them. */
function expectPaced(starts: number[], perSecond: number) {
  expect(starts).toEqual([...starts].sort((a, b) => a - b))
  for (let i = perSecond; i < starts.length; i += 1) {
    expect((starts[i] as number) - (starts[i - perSecond] as number)).toBeGreaterThanOrEqual(WINDOW_MS)
  }
}

describe('the pace object', () => {
  it('hands out slots one step of the pace apart, in the order asked, each with the slots that start in its window', async () => {
    const pace = env.SEND_PACE.getByName(`test-slots-${guid()}`)
    const slots: Slot[] = await Promise.all(
      Array.from({ length: 23 }, () => pace.take({ perSecond: 5, maxWaitMs: 60_000 })),
    )
    expect(slots.every((slot) => slot.kind === 'send' && slot.perSecond === 5)).toBe(true)
    const starts = slots.map((slot) => slot.at).sort((a, b) => a - b)
    expectPaced(starts, 5)
    for (let i = 1; i < starts.length; i += 1) {
      expect((starts[i] as number) - (starts[i - 1] as number)).toBeGreaterThanOrEqual(WINDOW_MS / 5)
    }
    // A slot never starts beside more of ours in its window than the rate: what Resend's count should be.
    expect(slots.every((slot) => slot.kind === 'send' && slot.startedInWindow <= 5)).toBe(true)
  })

  it('spaces slots from their starts, counts each window, and sends back those it cannot seat, spread at the pace', () => {
    const book = new SlotBook()
    const now = 1_000_000
    const answers = Array.from({ length: 12 }, () => book.take(now, { perSecond: 5, maxWaitMs: 1500 }))
    const step = WINDOW_MS / 5
    // Seven slots fit within 1.5 s, 220 ms apart; the other five are told to come back, one step apart,
    // and hold no slot.
    expect(answers).toEqual([
      ...[1, 2, 3, 4, 5, 5, 5].map((startedInWindow, i) => ({
        kind: 'send',
        at: now + i * step,
        waitMs: i * step,
        perSecond: 5,
        startedInWindow,
        careful: false,
      })),
      ...[7, 8, 9, 10, 11].map((i) => ({ kind: 'later', at: now + i * step, perSecond: 5 })),
    ])
    expect(book.take(now, { perSecond: 5, maxWaitMs: 60_000 })).toMatchObject({ kind: 'send', at: now + 7 * step })
    // After a quiet while, the next slot starts at once and is alone in its window.
    expect(book.take(now + 60_000, { perSecond: 5, maxWaitMs: 0 })).toMatchObject({
      kind: 'send',
      at: now + 60_000,
      startedInWindow: 1,
      careful: false,
    })
    // Careful for a while after a sign of another sender: the slots before its end say so, the next ones not.
    expect(book.beCareful(now + 60_000 + CAREFUL_MS)).toBe(true)
    expect(book.take(now + 61_000, { perSecond: 5, maxWaitMs: 0 })).toMatchObject({ careful: true })
    expect(book.take(now + 60_000 + CAREFUL_MS, { perSecond: 5, maxWaitMs: 0 })).toMatchObject({ careful: false })
  })

  it('a hold stops every slot until it ends, and outlives the object; a provider limit below the rate lowers it', async () => {
    const { apiKey } = ownTeam()
    const pace = await paceOf(apiKey)
    await pace.observe({ perSecond: 5, holdSeconds: 3600, cause: 'rate-limited' })
    const { heldUntil } = await kept(apiKey)
    expect(heldUntil).toBeGreaterThan(Date.now())
    await evictDurableObject(pace)
    const held = await (await paceOf(apiKey)).take({ perSecond: 5, maxWaitMs: PACE_MAX_WAIT_MS })
    expect(held).toEqual({ kind: 'later', at: heldUntil, perSecond: 5 })

    const lowered = env.SEND_PACE.getByName(`test-limit-${guid()}`)
    await lowered.observe({ perSecond: 5, limit: 2 })
    const slots = await Promise.all(Array.from({ length: 6 }, () => lowered.take({ perSecond: 5, maxWaitMs: 60_000 })))
    expect(slots.every((slot) => slot.perSecond === 2)).toBe(true)
    expectPaced(
      slots.map((slot) => slot.at),
      2,
    )
  })
})

describe('what an answer tells the pace', () => {
  const headers = (values: Record<string, string>) => new Headers(values)
  const answer = (values: Record<string, string>, rateLimited = false, waitSeconds?: number) => ({
    key: 'a-notification',
    headers: headers(values),
    rateLimited,
    waitSeconds,
  })
  const usual = { 'ratelimit-limit': '5', 'ratelimit-remaining': '3', 'ratelimit-reset': '1' }

  it('nothing, for most answers: one request to the pace per send', () => {
    expect(reportOf(answer(usual), 5, 5)).toBeUndefined()
    expect(reportOf(answer({}), 5, 5)).toBeUndefined()
    // A raised limit is no reason to go faster than configured.
    expect(reportOf(answer({ ...usual, 'ratelimit-limit': '50' }), 5, 5)).toBeUndefined()
  })

  it('a 429 holds for its retry-after; a window someone else spent until its reset; a lower limit, and a limit back up, are reported', () => {
    expect(reportOf(answer({ ...usual, 'retry-after': '7' }, true, 7), 5, 5)).toEqual({
      perSecond: 5,
      holdSeconds: 7,
      cause: 'rate-limited',
      shared: true,
    })
    const spent = answer({ ...usual, 'ratelimit-remaining': '0', 'ratelimit-reset': '1' })
    const ours = (startedInWindow: number, careful = false) => ({ startedInWindow, careful })
    // Five of our slots in the window: the window Resend counted full is ours, and the pace spaces the next already.
    expect(reportOf(spent, 5, 5, ours(5))).toBeUndefined()
    // Three of ours: someone else sends for the team too. No slot (the pace was out of reach): nothing explains it.
    for (const slot of [ours(3), undefined]) {
      expect(reportOf(spent, 5, 5, slot)).toEqual({
        perSecond: 5,
        holdSeconds: 1,
        cause: 'window-spent',
        shared: true,
      })
    }
    // Careful (another sender seen lately): a full window holds even when it is all ours, and keeps it no longer.
    expect(reportOf(spent, 5, 5, ours(5, true))).toEqual({
      perSecond: 5,
      holdSeconds: 1,
      cause: 'window-spent',
      shared: false,
    })
    // A window not full but fuller than ours: a sign of another sender, and nothing to hold yet.
    expect(reportOf(answer(usual), 5, 5, ours(1))).toEqual({ perSecond: 5, shared: true })
    expect(reportOf(answer(usual), 5, 5, ours(2))).toBeUndefined()
    // Counted against the limit Resend names, not the rate configured.
    expect(
      reportOf(
        { ...spent, headers: headers({ ...usual, 'ratelimit-limit': '2', 'ratelimit-remaining': '0' }) },
        5,
        2,
        ours(2),
      ),
    ).toBeUndefined()
    expect(reportOf(answer({ ...usual, 'ratelimit-limit': '2' }), 5, 5)).toEqual({ perSecond: 5, limit: 2 })
    expect(reportOf(answer(usual), 5, 2)).toEqual({ perSecond: 5, limit: 5 })
  })

  it('only the resend transport is paced', () => {
    const log = createLogger('error')
    expect(paceFor(env, configOf({ ...env, EMAIL_TRANSPORT: 'cloudflare' }), 'cloudflare', log)).toBeUndefined()
    const resend = { ...env, ...ownTeam().vars }
    expect(paceFor(resend, configOf(resend), 'resend', log)).toBeDefined()
  })
})

describe('sends through resend, paced', () => {
  it('twelve concurrent invocations at the team’s documented rate are spread: none is refused 429, each sent at its first attempt', async () => {
    const { vars } = ownTeam()
    const ids = await Promise.all(
      Array.from({ length: 12 }, (_, i) => pendingNotification(`paced-${i}-${guid().slice(0, 8)}@example.com`)),
    )
    const outcomes = await dispatchAll(ids, vars)
    for (const outcome of outcomes) expect(outcome.explicitAcks).toHaveLength(1)
    for (const id of ids) {
      expect(await rowOf(id)).toMatchObject({ status: 'sent', send_attempts: 1 })
      expect(await control('rate-limited', id)).toBe(0)
      expect(await control('sends', id)).toBe(1)
    }
  })

  it('a window full of our own sends holds nobody; one that another sender of the team filled holds every sender until its reset, and the pace turns careful', async () => {
    // Five sends of one account take five slots, a step apart; the answer to the last says the window is
    // spent (remaining 0). The pace knows each answer's slot by its request's idempotency key.
    const ours = ownTeam()
    const pace = new Pace(env.SEND_PACE, ours.apiKey, 5, createLogger('error'))
    const inOrder: string[] = []
    await Promise.all(
      ['own-0', 'own-1', 'own-2', 'own-3', 'own-4'].map(async (key) => {
        expect(await pace.slot(key)).toEqual({ kind: 'go' })
        inOrder.push(key)
      }),
    )
    const spent = new Headers({ 'ratelimit-limit': '5', 'ratelimit-remaining': '0', 'ratelimit-reset': '1' })
    await pace.observe({ key: inOrder.at(-1) as string, headers: spent, rateLimited: false, waitSeconds: undefined })
    // Five of ours in the window: the window Resend counted full is ours, and nothing is held.
    expect(await kept(ours.apiKey)).toEqual({})
    const next = await (await paceOf(ours.apiKey)).take({ perSecond: 5, maxWaitMs: PACE_MAX_WAIT_MS })
    expect(next).toMatchObject({ kind: 'send', careful: false })

    // The fake's clock for each team stands still: every request counts in one second, however long the sends take.
    const holdClock = (apiKey: string, at?: number) =>
      fetch(`${FAKE_RESEND_URL}/control/rate-clock?key=${apiKey}${at === undefined ? '' : `&at=${at}`}`, {
        method: 'POST',
      })
    const shared = ownTeam()
    await holdClock(shared.apiKey, Date.now())
    try {
      // Another service of the team sends four; our one send is the fifth of the team's second.
      const otherService = resendTransport({ apiKey: shared.apiKey, baseUrl: FAKE_RESEND_URL })
      for (let i = 0; i < 4; i += 1) {
        await otherService.send({
          notificationId: `other-service-${guid()}`,
          from: { address: 'notifications@notify-edge.example', name: 'ArtHunt' },
          to: { address: `other-service-${i}@example.com`, name: 'Анна' },
          subject: 'Другой сервис',
          text: 'Текст',
          html: '<p>Текст</p>',
          unsubscribeUrl: null,
        })
      }
      const id = await pendingNotification(`shared-window-${guid().slice(0, 8)}@example.com`)
      const before = Date.now()
      await dispatchOnce({ notificationId: id }, shared.vars)
      expect(await rowOf(id)).toMatchObject({ status: 'sent', send_attempts: 1 })
      // Every sender of the account waits for the window's reset (a second) rather than meet a 429, and for a
      // while a full window holds them even when it is all ours: the slack the other service needs.
      expect((await kept(shared.apiKey)).heldUntil).toBeGreaterThanOrEqual(before + 1000)
      const careful = await (await paceOf(shared.apiKey)).take({ perSecond: 5, maxWaitMs: 60_000 })
      expect(careful).toMatchObject({ kind: 'send', careful: true })
    } finally {
      await holdClock(shared.apiKey)
    }
  })

  it('a lower ratelimit-limit in an answer lowers the pace for every sender, and is kept', async () => {
    const { apiKey, vars } = ownTeam({ RESEND_REQUESTS_PER_SECOND: '10' })
    const first = await pendingNotification(`limit-${guid().slice(0, 8)}@example.com`)
    await dispatchAll([first], vars)
    expect(await kept(apiKey)).toMatchObject({ limit: 5 })
    const ids = await Promise.all(
      Array.from({ length: 10 }, (_, i) => pendingNotification(`limit-${i}-${guid().slice(0, 8)}@example.com`)),
    )
    await dispatchAll(ids, vars)
    for (const id of [first, ...ids]) {
      expect(await rowOf(id)).toMatchObject({ status: 'sent', send_attempts: 1 })
      expect(await control('rate-limited', id)).toBe(0)
    }
  })

  it("a 429's retry-after holds every sender of the account; waiting for it never uses up a notification's attempts", async () => {
    // One retry in the policy: a wait that counted would end these failed by the second one.
    const { apiKey, vars } = ownTeam({ DISPATCH_RETRY_DELAYS_SECONDS: '5' })
    const limited = await pendingNotification(`ratelimited-${guid().slice(0, 8)}@example.com`)
    await dispatchAll([limited], vars)
    // It reached the provider: its try counts, and it waits the hour the 429 asked for.
    expect(await rowOf(limited)).toMatchObject({ status: 'pending', send_attempts: 1 })
    const { heldUntil } = await kept(apiKey)
    expect(heldUntil).toBeGreaterThan(Date.now())

    const others = await Promise.all(
      Array.from({ length: 3 }, (_, i) => pendingNotification(`held-${i}-${guid().slice(0, 8)}@example.com`)),
    )
    for (let round = 0; round < 3; round += 1) {
      // Each round: due now, delivered; the pace has no slot before the hold ends, so each goes back.
      const due = new Date(Date.now() - 1).toISOString()
      for (const id of others) {
        await env.DB.prepare('UPDATE notifications SET scheduled_at = ?2 WHERE id = ?1').bind(id, due).run()
      }
      const outcomes = await Promise.all(others.map((id) => dispatchOnce({ notificationId: id, due }, vars)))
      for (const [index, id] of others.entries()) {
        const row = await rowOf(id)
        expect(row).toMatchObject({ status: 'pending', send_attempts: 0 })
        expect(row.status_reason).toMatch(/^waiting for a send slot/)
        expect(Date.parse(row.scheduled_at)).toBeGreaterThanOrEqual(heldUntil as number)
        // Back on the queue for that time, acked, no retry of the queue's own.
        expect(outcomes[index]?.enqueued.map((message) => message.body)).toEqual([
          { notificationId: id, due: row.scheduled_at },
        ])
        expect(outcomes[index]?.explicitAcks).toHaveLength(1)
        expect(outcomes[index]?.delays).toEqual([])
      }
    }
    for (const id of others) {
      expect(await control('sends', id)).toBe(0)
      expect(await control('rate-limited', id)).toBe(0)
    }
    const dead = await env.DB.prepare(
      'SELECT count(*) AS n FROM dead_letters WHERE body LIKE ?1 OR body LIKE ?2 OR body LIKE ?3',
    )
      .bind(...others.map((id) => `%${id}%`))
      .first()
    expect(dead).toEqual({ n: 0 })
  })
})
