import { DurableObject } from 'cloudflare:workers'
import { CLOSE_ERASED, CLOSE_TOKEN_EXPIRED, SOCKET_PROTOCOL } from '@notify-edge/inbox/wire'
import { configOf } from '../config.ts'
import { type EscalationDecision, Feed, type ItemMarks, PAGE_MAX } from './feed.ts'
import type { Counts, FeedChange, InboxItem, Mark, NewItem, SocketMessage, Target } from './item.ts'

/** The socket's protocol and close codes, and what it sends, are the client's wire (packages/inbox). */
export { CLOSE_ERASED, CLOSE_TOKEN_EXPIRED, SOCKET_PROTOCOL, type SocketMessage }

/** How the Worker tells the object until when a socket's token holds (seconds since the epoch); only the Worker reaches the object. */
export const EXPIRES_HEADER = 'x-inbox-token-expires'

/** The most items one alarm removes by retention; the next alarm comes at once for the rest. */
const REMOVE_MAX = 500

/** The most items a socket is sent to catch up; further behind, it is told to start over. */
export const CATCH_UP_MAX = 1000

/** What a socket keeps through hibernation: when its token ends. */
type Attachment = { expiresAt: number }

/**
 * One recipient's in-app feed: a Durable Object named by the user id, holding
 * the items in its SQLite storage (./feed.ts) and the recipient's open
 * browser sockets. Cloudflare runs one instance of an object at a time and
 * delivers its calls one after another, so an item is added once however
 * often dispatch delivers it, and the counts change with the items in one
 * transaction. Sockets use the WebSocket Hibernation API: the object accepts
 * them with `ctx.acceptWebSocket`, "clients remain connected while the
 * Durable Object is not in memory", and a `ping` is answered `pong` by the
 * runtime without waking it
 * (https://developers.cloudflare.com/durable-objects/best-practices/websockets/).
 * An alarm closes each socket when its token ends.
 */
export class InboxFeed extends DurableObject<Env> {
  #feed: Feed

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.#feed = new Feed(ctx.storage)
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair('ping', 'pong'))
  }

  /** Adds a notification's item (once) and tells the open sockets; the first item sets the alarm of its retention. */
  async add(item: NewItem): Promise<{ added: boolean; counts: Counts }> {
    const change = this.#feed.add(item)
    if (change !== undefined) this.#tell(change)
    const { unseen, unread } = this.#feed.state()
    if (change !== undefined && (await this.ctx.storage.getAlarm()) === null) await this.#arrange()
    return { added: change !== undefined, counts: { unseen, unread } }
  }

  /** Marks items (by id, or all of them) and tells the open sockets; `changed` is how many items took the mark. */
  mark(mark: Mark, target: Target, at: string): { changed: boolean; counts: Counts } {
    const change = this.#feed.mark(mark, target, at)
    if (change !== undefined) this.#tell(change)
    const { unseen, unread } = this.#feed.state()
    return { changed: change !== undefined, counts: { unseen, unread } }
  }

  /** A page of items, newest first, with the feed's name, counts and change number. */
  page(query: { limit: number; before?: number; archived: boolean }): {
    items: InboxItem[]
    nextBefore: number | null
    feed: string
    counts: Counts
    version: number
  } {
    const { feed, unseen, unread, version } = this.#feed.state()
    return { ...this.#feed.page(query), feed, counts: { unseen, unread }, version }
  }

  /**
   * Erases the feed: every item, the counts and the change numbers go
   * (`deleteAll`, the object's whole SQLite database), the feed is made again
   * under another name, and its open sockets are closed (4002): a client that
   * comes back is told to start over.
   */
  async erase(): Promise<void> {
    await this.ctx.storage.deleteAll()
    this.#feed = new Feed(this.ctx.storage)
    this.#feed.erasedAt(new Date().toISOString())
    for (const ws of this.ctx.getWebSockets()) {
      try {
        ws.close(CLOSE_ERASED, 'erased')
      } catch {}
    }
  }

  /**
   * When the items of these notifications were seen, read and archived, for
   * an event's story (one call per recipient); an item the feed no longer
   * holds has no entry.
   */
  marksOf(ids: string[]): ItemMarks[] {
    return this.#feed.marksOf(ids)
  }

  /**
   * Decides, once, whether the email waiting on notification `id`'s item
   * goes (./feed.ts): one object runs one call at a time, so a mark and the
   * decision are never at once, and the answer never changes.
   */
  async escalate(id: string, unless: 'seen' | 'read', at: string, deadline: string): Promise<EscalationDecision> {
    const decision = this.#feed.escalate(id, unless, at, deadline)
    // The decision ages out with the items (the alarm); a feed without items has none set yet.
    if ((await this.ctx.storage.getAlarm()) === null) await this.#arrange()
    return decision
  }

  /**
   * Withdraws the items of these notifications (a cancellation) and tells the
   * open sockets, whose pages drop them and whose counts follow; the feed
   * refuses them from then on. `removed`: how many items it held.
   */
  async withdraw(ids: string[], at: string): Promise<{ removed: number; counts: Counts }> {
    const change = this.#feed.withdraw(ids, at)
    if (change !== undefined) this.#tell(change)
    const { unseen, unread } = this.#feed.state()
    // The refusals age out with the items (the alarm); a feed without items has none set yet.
    if ((await this.ctx.storage.getAlarm()) === null) await this.#arrange()
    return { removed: change?.type === 'removed' ? change.ids.length : 0, counts: { unseen, unread } }
  }

  /** The kept counts and the counts the items give, counted afresh (the tests compare them). */
  audit(): { kept: Counts; counted: Counts } {
    const { unseen, unread } = this.#feed.state()
    return { kept: { unseen, unread }, counted: this.#feed.recount() }
  }

  /**
   * Opens a socket (the Worker checked its token and passes its expiry):
   * sends what the client missed after `?after=` and the state, then every
   * change as it happens, until the token ends.
   */
  override async fetch(request: Request): Promise<Response> {
    const expiresAt = Number(request.headers.get(EXPIRES_HEADER))
    const pair = new WebSocketPair()
    const [client, server] = [pair[0], pair[1]]
    this.ctx.acceptWebSocket(server)
    server.serializeAttachment({ expiresAt } satisfies Attachment)
    const query = new URL(request.url).searchParams
    const after = query.get('after')
    const known = query.get('feed')
    const { feed, unseen, unread, version, removed } = this.#feed.state()
    const from = after === null ? version : Number(after)
    // Start over, rather than catch up: another feed (erased and made again), a number this feed never
    // gave, items removed since (retention: a catch-up cannot send what is gone), or more changes than a
    // catch-up carries (a page of GET /v1/inbox is the way back then).
    const reset =
      (known !== null && known !== feed) ||
      from > version ||
      from < removed ||
      (from < version && this.#feed.changedSince(from, CATCH_UP_MAX) > CATCH_UP_MAX)
    // Pages by (change number, arrival), starting past every item of the number the client saw: a mark on
    // all items gives many items one change number.
    if (!reset && from < version) {
      let cursor = { version: from, seq: Number.MAX_SAFE_INTEGER }
      for (;;) {
        const items = this.#feed.since(cursor, PAGE_MAX)
        if (items.length > 0) send(server, { type: 'missed', items })
        const last = items.at(-1)
        if (last === undefined || items.length < PAGE_MAX) break
        cursor = { version: last.version, seq: last.seq }
      }
    }
    send(server, { type: 'state', feed, counts: { unseen, unread }, version, reset })
    await this.#arrange()
    return new Response(null, {
      status: 101,
      webSocket: client,
      headers: { 'sec-websocket-protocol': SOCKET_PROTOCOL },
    })
  }

  /** A client sends nothing but `ping`, which the runtime answers without waking the object; anything else is ignored. */
  override async webSocketMessage(): Promise<void> {}

  /** A socket that failed is gone; its client catches up when it comes back. */
  override async webSocketError(): Promise<void> {}

  /** Closes the sockets whose token ended, and removes the items past their retention. */
  override async alarm(): Promise<void> {
    await this.#arrange()
  }

  override async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    // Completes the closing handshake the client started; the runtime may have answered it already.
    try {
      ws.close(code, reason)
    } catch {}
  }

  /** Sends a change to every open socket whose token still holds. */
  #tell(change: FeedChange): void {
    const now = Date.now() / 1000
    for (const ws of this.ctx.getWebSockets()) {
      if ((ws.deserializeAttachment() as Attachment).expiresAt > now) send(ws, change)
    }
  }

  /**
   * What the alarm does, and when it next rings: closes the sockets whose
   * token ended; removes the items older than INBOX_RETENTION_DAYS (at most
   * REMOVE_MAX a time) and tells the sockets; then sets the alarm for the
   * next token to end or the next item to age out, whichever comes first.
   */
  async #arrange(): Promise<void> {
    const now = Date.now()
    let next = Number.POSITIVE_INFINITY
    for (const ws of this.ctx.getWebSockets()) {
      const { expiresAt } = ws.deserializeAttachment() as Attachment
      if (expiresAt * 1000 <= now) {
        try {
          ws.close(CLOSE_TOKEN_EXPIRED, 'token expired')
        } catch {}
      } else next = Math.min(next, expiresAt * 1000)
    }
    const keep = configOf(this.env).INBOX_RETENTION_DAYS * 86_400_000
    const removed = this.#feed.removeOlder(new Date(now - keep).toISOString(), REMOVE_MAX)
    if (removed !== undefined) this.#tell(removed)
    // The oldest of what ages out: an item, or a decision or refusal kept as long as the items.
    const oldest = [this.#feed.oldest(), this.#feed.oldestRecord()]
      .filter((at): at is string => at !== undefined)
      .sort()[0]
    if (oldest !== undefined) {
      // More than a time's worth aged out: come back at once for the rest.
      next = Math.min(
        next,
        removed?.type === 'removed' && removed.ids.length === REMOVE_MAX ? now : Date.parse(oldest) + keep,
      )
    }
    // Each setAlarm is a row written (Durable Objects pricing): set only when the time moves; a socket opening
    // beside one that ends later moves nothing.
    if (next !== Number.POSITIVE_INFINITY && (await this.ctx.storage.getAlarm()) !== next) {
      await this.ctx.storage.setAlarm(next)
    }
  }
}

function send(ws: WebSocket, message: SocketMessage): void {
  try {
    ws.send(JSON.stringify(message))
  } catch {
    // A socket that closed meanwhile: its client catches up when it comes back.
  }
}
