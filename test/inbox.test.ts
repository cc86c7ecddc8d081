/**
 * The in-app inbox (src/inbox/): one Durable Object per recipient holding the
 * feed in its SQLite storage, the end user's token, the routes and the live
 * socket — in the real Durable Object of wrangler.toml, through the Worker's
 * own fetch handler.
 */
import { createExecutionContext, evictDurableObject, runDurableObjectAlarm } from 'cloudflare:test'
import { env, exports } from 'cloudflare:workers'
import fc from 'fast-check'
import { sign } from 'hono/jwt'
import { describe, expect, it } from 'vitest'
import { CATCH_UP_MAX, CLOSE_TOKEN_EXPIRED, SOCKET_PROTOCOL, type SocketMessage } from '../src/inbox/inbox-feed.ts'
import type { Counts, Mark, NewItem } from '../src/inbox/item.ts'
import { INBOX_AUDIENCE } from '../src/inbox/token.ts'
import worker from '../src/index.ts'
import { guid } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const SECRET = env.INBOX_TOKEN_SECRET

/** An inbox token as a host application signs it: HS256 over `sub`, `aud` and `exp`. */
async function tokenFor(userId: string, claims: Record<string, unknown> = {}, secret = SECRET): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  return sign({ sub: userId, aud: INBOX_AUDIENCE, exp: now + 600, ...claims }, secret, 'HS256')
}

function itemOf(id: string, at = new Date().toISOString()): NewItem {
  return { notificationId: id, kind: 'ResponseCreated', title: `Item ${id}`, body: 'a body', createdAt: at }
}

async function inboxGet(token: string, query = ''): Promise<Response> {
  return fetchWorker(`/v1/inbox${query}`, { headers: { authorization: `Bearer ${token}` } })
}

async function inboxMark(token: string, mark: Mark, target: unknown): Promise<Response> {
  return fetchWorker(`/v1/inbox/${mark}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(target),
  })
}

/**
 * A socket as a browser opens one — the protocol and the token as a second subprotocol — or, with `header`,
 * as a server-side client does: the token in Authorization and no subprotocol.
 */
async function openSocket(token: string, resume: { after?: number; feed?: string; header?: true } = {}) {
  const query = new URLSearchParams()
  if (resume.after !== undefined) query.set('after', String(resume.after))
  if (resume.feed !== undefined) query.set('feed', resume.feed)
  const response = await exports.default.fetch(`http://worker/v1/inbox/socket?${query}`, {
    headers: resume.header
      ? { upgrade: 'websocket', authorization: `Bearer ${token}` }
      : { upgrade: 'websocket', 'sec-websocket-protocol': `${SOCKET_PROTOCOL}, bearer.${token}` },
  })
  expect(response.status).toBe(101)
  expect(response.headers.get('sec-websocket-protocol')).toBe(resume.header ? null : SOCKET_PROTOCOL)
  const ws = response.webSocket as WebSocket
  const received: SocketMessage[] = []
  const waiters: (() => void)[] = []
  let closed: { code: number } | undefined
  ws.addEventListener('message', (event) => {
    received.push(JSON.parse(event.data as string) as SocketMessage)
    for (const wake of waiters.splice(0)) wake()
  })
  ws.addEventListener('close', (event) => {
    closed = { code: event.code }
    for (const wake of waiters.splice(0)) wake()
  })
  ws.accept()
  /** Waits until `count` messages have come. */
  const messages = async (count: number): Promise<SocketMessage[]> => {
    while (received.length < count && closed === undefined) await new Promise<void>((wake) => waiters.push(wake))
    return received.slice(0, count)
  }
  const closing = async (): Promise<{ code: number }> => {
    while (closed === undefined) await new Promise<void>((wake) => waiters.push(wake))
    return closed
  }
  return { ws, received, messages, closing }
}

describe('the feed', () => {
  it('keeps its unseen and unread counts equal to its items through any sequence of add, seen, read, archive and all', async () => {
    const ids = ['a', 'b', 'c', 'd', 'e']
    const command = fc.oneof(
      fc.record({ op: fc.constant('add' as const), id: fc.constantFrom(...ids) }),
      fc.record({
        op: fc.constantFrom<Mark>('seen', 'read', 'archived'),
        target: fc.oneof(
          fc.record({ ids: fc.uniqueArray(fc.constantFrom(...ids, 'not-here'), { minLength: 1, maxLength: 4 }) }),
          fc.constant({ all: true as const }),
        ),
      }),
    )
    await fc.assert(
      fc.asyncProperty(fc.array(command, { maxLength: 25 }), async (commands) => {
        const feed = env.INBOX.getByName(`property-${guid()}`)
        // The model: each item's marks.
        const model = new Map<string, { seen: boolean; read: boolean; archived: boolean }>()
        const expected = (): Counts => {
          const live = [...model.values()].filter((item) => !item.archived)
          return { unseen: live.filter((item) => !item.seen).length, unread: live.filter((item) => !item.read).length }
        }
        for (const step of commands) {
          if (step.op === 'add') {
            const answer = await feed.add(itemOf(step.id))
            expect(answer.added).toBe(!model.has(step.id))
            if (!model.has(step.id)) model.set(step.id, { seen: false, read: false, archived: false })
            expect(answer.counts).toEqual(expected())
          } else {
            const chosen = 'all' in step.target ? [...model.keys()] : step.target.ids.filter((id) => model.has(id))
            const key = step.op === 'seen' ? 'seen' : step.op === 'read' ? 'read' : 'archived'
            const changes = chosen.some((id) => !model.get(id)?.[key])
            for (const id of chosen) {
              const item = model.get(id) as { seen: boolean; read: boolean; archived: boolean }
              item[key] = true
              if (key === 'read') item.seen = true
            }
            // A plain copy: fast-check's records have no prototype, which RPC does not carry.
            const target = JSON.parse(JSON.stringify(step.target)) as typeof step.target
            const answer = await feed.mark(step.op, target, new Date().toISOString())
            expect(answer.changed).toBe(changes)
            expect(answer.counts).toEqual(expected())
          }
        }
        const { kept, counted } = await feed.audit()
        expect(kept).toEqual(expected())
        expect(counted).toEqual(kept)
      }),
      { numRuns: 40 },
    )
  })

  it('adds an item once however often its notification is delivered', async () => {
    const feed = env.INBOX.getByName(`once-${guid()}`)
    expect((await feed.add(itemOf('n1'))).added).toBe(true)
    const again = await feed.add({ ...itemOf('n1'), title: 'another title' })
    expect(again).toEqual({ added: false, counts: { unseen: 1, unread: 1 } })
    const page = await feed.page({ limit: 10, archived: false })
    expect(page.items.map((item) => [item.id, item.title])).toEqual([['n1', 'Item n1']])
  })

  it('once erased, takes no item of a notification made before the erasure, as a delivery in flight would bring', async () => {
    const feed = env.INBOX.getByName(`erased-${guid()}`)
    const before = new Date(Date.now() - 60_000).toISOString()
    await feed.add({ ...itemOf('n1'), notifiedAt: before })
    await feed.erase()
    expect((await feed.add({ ...itemOf('n1'), notifiedAt: before })).added).toBe(false)
    expect((await feed.add({ ...itemOf('n2'), notifiedAt: new Date(Date.now() + 1000).toISOString() })).added).toBe(
      true,
    )
    expect((await feed.page({ limit: 10, archived: true })).items.map((item) => item.id)).toEqual(['n2'])
  })

  it('pages newest first, leaving archived items out unless asked', async () => {
    const feed = env.INBOX.getByName(`pages-${guid()}`)
    for (const id of ['n1', 'n2', 'n3', 'n4', 'n5']) await feed.add(itemOf(id))
    await feed.mark('archived', { ids: ['n4'] }, new Date().toISOString())
    const first = await feed.page({ limit: 2, archived: false })
    expect(first.items.map((item) => item.id)).toEqual(['n5', 'n3'])
    const second = await feed.page({ limit: 2, before: first.nextBefore as number, archived: false })
    expect(second.items.map((item) => item.id)).toEqual(['n2', 'n1'])
    expect(second.nextBefore).toBeNull()
    const all = await feed.page({ limit: 10, archived: true })
    expect(all.items.map((item) => item.id)).toEqual(['n5', 'n4', 'n3', 'n2', 'n1'])
    expect(all.counts).toEqual({ unseen: 4, unread: 4 })
  })
})

describe('the inbox token', () => {
  it('opens only its own user’s feed', async () => {
    const owner = `owner-${guid()}`
    const stranger = `stranger-${guid()}`
    await env.INBOX.getByName(owner).add(itemOf('secret-item'))
    const mine = await inboxGet(await tokenFor(owner))
    expect(mine.status).toBe(200)
    expect(((await mine.json()) as { items: { id: string }[] }).items.map((item) => item.id)).toEqual(['secret-item'])
    const theirs = await inboxGet(await tokenFor(stranger))
    expect(await theirs.json()).toMatchObject({ items: [], counts: { unseen: 0, unread: 0 } })
    // Naming the owner's item changes nothing of the owner's.
    const marked = await inboxMark(await tokenFor(stranger), 'read', { ids: ['secret-item'] })
    expect(await marked.json()).toEqual({ changed: false, counts: { unseen: 0, unread: 0 } })
    expect((await env.INBOX.getByName(owner).audit()).kept).toEqual({ unseen: 1, unread: 1 })
  })

  it('refuses a token this Worker did not sign, or one that says too little or lives too long; an expired one is told so', async () => {
    const user = `user-${guid()}`
    const now = Math.floor(Date.now() / 1000)
    const refused = [
      await tokenFor(user, {}, 'another-secret-of-32-characters-at-least'),
      await tokenFor(user, { aud: 'something-else' }),
      await tokenFor(user, { exp: undefined }),
      await tokenFor(user, { exp: now + 2 * 24 * 3600 }),
      await tokenFor('', {}),
      await tokenFor(user, { nbf: now + 3600 }),
      await sign(null as unknown as Record<string, unknown>, SECRET, 'HS256'),
      'not-a-token',
    ]
    for (const token of refused) {
      const answer = await inboxGet(token)
      expect(answer.status).toBe(401)
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED')
    }
    const expired = await inboxGet(await tokenFor(user, { exp: now - 1 }))
    expect(expired.status).toBe(401)
    expect(((await expired.json()) as { error: { code: string } }).error.code).toBe('TOKEN_EXPIRED')
    const none = await fetchWorker('/v1/inbox')
    expect(none.status).toBe(401)
  })

  it('throttles a client’s wrong tokens, never a right one, and a missing token is no attempt', async () => {
    const user = `shared-${guid()}`
    // Many users behind one address: its wrong tokens are throttled (429 past the binding's ten a minute) …
    const address = { 'cf-connecting-ip': `198.51.100.${Math.floor(Math.random() * 200) + 1}` }
    const forged = await tokenFor(user, {}, 'a-wrong-secret-that-is-long-enough-0123')
    const statuses: number[] = []
    for (let attempt = 0; attempt < 12; attempt += 1) {
      statuses.push(
        (await fetchWorker('/v1/inbox', { headers: { ...address, authorization: `Bearer ${forged}` } })).status,
      )
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401))
    expect(statuses.at(-1)).toBe(429)
    // … while a right token from the same address still opens its feed,
    const right = await fetchWorker('/v1/inbox', {
      headers: { ...address, authorization: `Bearer ${await tokenFor(user)}` },
    })
    expect(right.status).toBe(200)
    // and requests without any token, from another address, are refused each without counting towards a 429.
    const other = { 'cf-connecting-ip': '203.0.113.7' }
    for (let attempt = 0; attempt < 12; attempt += 1) {
      expect((await fetchWorker('/v1/inbox', { headers: other })).status).toBe(401)
    }
  })

  it('answers the host application’s origins only, before any token (CORS)', async () => {
    const preflight = (origin: string, vars: Record<string, string>) =>
      worker.fetch(
        new Request('http://worker/v1/inbox/read', {
          method: 'OPTIONS',
          headers: {
            origin,
            'access-control-request-method': 'POST',
            'access-control-request-headers': 'authorization',
          },
        }),
        { ...env, ...vars } as Env,
        createExecutionContext(),
      )
    const allowed = await preflight('https://app.example.com', { INBOX_ALLOWED_ORIGINS: 'https://app.example.com' })
    expect(allowed.status).toBe(204)
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example.com')
    expect(allowed.headers.get('access-control-allow-headers')).toMatch(/authorization/)
    const stranger = await preflight('https://evil.example', { INBOX_ALLOWED_ORIGINS: 'https://app.example.com' })
    expect(stranger.headers.get('access-control-allow-origin')).toBeNull()
    const unset = await preflight('https://app.example.com', {})
    expect(unset.headers.get('access-control-allow-origin')).toBeNull()
  })

  it('takes a token signed with the previous secret during a rotation', async () => {
    const user = `rotated-${guid()}`
    const next = 'next-inbox-token-secret-0123456789abcdef'
    const answer = await fetchWorker(
      '/v1/inbox',
      { headers: { authorization: `Bearer ${await tokenFor(user)}` } },
      { INBOX_TOKEN_SECRET: next, INBOX_TOKEN_SECRET_PREVIOUS: SECRET },
    )
    expect(answer.status).toBe(200)
    const closed = await fetchWorker('/v1/inbox', { headers: { authorization: `Bearer ${await tokenFor(user)}` } }, {
      INBOX_TOKEN_SECRET: undefined,
    } as unknown as Record<string, string>)
    expect(closed.status).toBe(401)
  })
})

describe('the routes', () => {
  it('marks items seen, read and archived, one or all, and the counts follow', async () => {
    const user = `marks-${guid()}`
    const token = await tokenFor(user)
    for (const id of ['n1', 'n2', 'n3']) await env.INBOX.getByName(user).add(itemOf(id))
    expect(await (await inboxMark(token, 'seen', { ids: ['n1'] })).json()).toEqual({
      changed: true,
      counts: { unseen: 2, unread: 3 },
    })
    expect(await (await inboxMark(token, 'read', { ids: ['n2'] })).json()).toEqual({
      changed: true,
      counts: { unseen: 1, unread: 2 },
    })
    expect(await (await inboxMark(token, 'archived', { ids: ['n3'] })).json()).toEqual({
      changed: true,
      counts: { unseen: 0, unread: 1 },
    })
    expect(await (await inboxMark(token, 'read', { all: true })).json()).toEqual({
      changed: true,
      counts: { unseen: 0, unread: 0 },
    })
    const page = (await (await inboxGet(token, '?archived=true')).json()) as {
      items: { id: string; seenAt: string | null; readAt: string | null; archivedAt: string | null }[]
    }
    expect(
      page.items.map((item) => [item.id, item.seenAt !== null, item.readAt !== null, item.archivedAt !== null]),
    ).toEqual([
      // Reading all reads (and sees) the archived one too.
      ['n3', true, true, true],
      ['n2', true, true, false],
      ['n1', true, true, false],
    ])
  })

  it('refuses a mark that names no items or both ways', async () => {
    const token = await tokenFor(`bad-${guid()}`)
    for (const body of [{}, { ids: [] }, { all: false }, { ids: ['a'], all: true }]) {
      const answer = await inboxMark(token, 'read', body)
      expect(answer.status).toBe(400)
    }
  })
})

describe('the socket', () => {
  it('pushes new items and marks as they happen, and keeps its sockets while the object is evicted', async () => {
    const user = `live-${guid()}`
    const feed = env.INBOX.getByName(user)
    const socket = await openSocket(await tokenFor(user))
    const [state] = await socket.messages(1)
    expect(state).toEqual({
      type: 'state',
      feed: expect.stringMatching(/^[0-9a-f]{16}$/),
      counts: { unseen: 0, unread: 0 },
      version: 0,
      reset: false,
    })
    await feed.add(itemOf('n1'))
    const [, added] = await socket.messages(2)
    expect(added).toMatchObject({ type: 'added', item: { id: 'n1' }, counts: { unseen: 1, unread: 1 }, version: 1 })
    // Hibernation: the object leaves memory, the socket stays open, and the next change still reaches it.
    await evictDurableObject(feed)
    await inboxMark(await tokenFor(user), 'read', { ids: ['n1'] })
    const [, , marked] = await socket.messages(3)
    expect(marked).toMatchObject({
      type: 'marked',
      mark: 'read',
      ids: ['n1'],
      counts: { unseen: 0, unread: 0 },
      version: 2,
    })
    socket.ws.close(1000, 'done')
  })

  it('sends a client that comes back with its last version each item changed since, once, in order', async () => {
    const user = `resume-${guid()}`
    const feed = env.INBOX.getByName(user)
    const first = await openSocket(await tokenFor(user))
    await feed.add(itemOf('n1'))
    await feed.add(itemOf('n2'))
    const seenBy = await first.messages(3)
    const last = seenBy.at(-1) as { version: number }
    first.ws.close(1000, 'network gone')
    // While it is away: two more items, and one of the two it had is read, another read twice over.
    await feed.add(itemOf('n3'))
    await feed.mark('read', { ids: ['n1'] }, new Date().toISOString())
    await feed.add(itemOf('n4'))
    await feed.mark('read', { all: true }, new Date().toISOString())
    const back = await openSocket(await tokenFor(user), { after: last.version })
    const [missed, state] = await back.messages(2)
    expect(missed?.type).toBe('missed')
    const items = (missed as { items: { id: string; readAt: string | null; version: number }[] }).items
    expect(items.map((item) => item.id).sort()).toEqual(['n1', 'n2', 'n3', 'n4'])
    expect(items.every((item) => item.readAt !== null)).toBe(true)
    expect(items.map((item) => item.version)).toEqual([...items.map((item) => item.version)].sort((a, b) => a - b))
    expect(state).toMatchObject({ type: 'state', counts: { unseen: 0, unread: 0 }, version: 6, reset: false })
    back.ws.close(1000, 'done')
  })

  it('sends a client that comes back only what it has not seen; another feed, or too much, starts it over', async () => {
    const user = `again-${guid()}`
    const feed = env.INBOX.getByName(user)
    await feed.add(itemOf('n1'))
    await feed.add(itemOf('n2'))
    const { feed: name, version } = await feed.page({ limit: 1, archived: false })
    // Back with nothing new: no catch-up at all, and a client without a subprotocol is answered none.
    const unchanged = await openSocket(await tokenFor(user), { after: version, feed: name, header: true })
    expect(await unchanged.messages(1)).toEqual([
      { type: 'state', feed: name, counts: { unseen: 2, unread: 2 }, version, reset: false },
    ])
    unchanged.ws.close(1000, 'done')
    await feed.add(itemOf('n3'))
    const one = await openSocket(await tokenFor(user), { after: version, feed: name })
    const [missed] = await one.messages(2)
    expect((missed as { items: { id: string }[] }).items.map((item) => item.id)).toEqual(['n3'])
    one.ws.close(1000, 'done')
    // Another feed's name: the copy is thrown away, nothing is caught up.
    const other = await openSocket(await tokenFor(user), { after: version, feed: '0123456789abcdef' })
    expect(await other.messages(1)).toMatchObject([{ type: 'state', reset: true, version: version + 1 }])
    other.ws.close(1000, 'done')
    // More than a catch-up carries: start over from the first page.
    for (let index = 0; index <= CATCH_UP_MAX; index += 1) await feed.add(itemOf(`bulk-${index}`))
    const far = await openSocket(await tokenFor(user), { after: version + 1, feed: name })
    expect(await far.messages(1)).toMatchObject([{ type: 'state', reset: true }])
    far.ws.close(1000, 'done')
  })

  it('removes the items past INBOX_RETENTION_DAYS, out of the counts, tells the sockets, and starts a client that missed it over', async () => {
    const user = `aged-${guid()}`
    const feed = env.INBOX.getByName(user)
    // The first item sets the alarm for when it ages out; two that arrived long before (as no delivery
    // makes them: each item arrives now) wait for that alarm.
    await feed.add(itemOf('new'))
    await feed.add(itemOf('old-unread', '2020-01-01T00:00:00.000Z'))
    await feed.add(itemOf('old-archived', '2020-01-02T00:00:00.000Z'))
    await feed.mark('archived', { ids: ['old-archived'] }, new Date().toISOString())
    const { feed: name, version } = await feed.page({ limit: 1, archived: false })
    const socket = await openSocket(await tokenFor(user), { after: version, feed: name })
    await socket.messages(1)
    // The alarm rings now, as Cloudflare would ring it when its time came.
    expect(await runDurableObjectAlarm(feed)).toBe(true)
    const [, removed] = await socket.messages(2)
    expect(removed).toMatchObject({
      type: 'removed',
      ids: ['old-unread', 'old-archived'],
      counts: { unseen: 1, unread: 1 },
      version: version + 1,
    })
    const after = await feed.page({ limit: 10, archived: true })
    expect(after.items.map((item) => item.id)).toEqual(['new'])
    expect((await feed.audit()).counted).toEqual({ unseen: 1, unread: 1 })
    // A client that last saw a change before the removal holds items that are gone: it starts over.
    const behind = await openSocket(await tokenFor(user), { after: version, feed: name })
    expect(await behind.messages(1)).toMatchObject([{ type: 'state', reset: true }])
    socket.ws.close(1000, 'done')
    behind.ws.close(1000, 'done')
  })

  it('closes with 4001 when its token expires', async () => {
    const user = `expiring-${guid()}`
    const socket = await openSocket(await tokenFor(user, { exp: Math.floor(Date.now() / 1000) + 2 }))
    expect((await socket.closing()).code).toBe(CLOSE_TOKEN_EXPIRED)
  })
})
