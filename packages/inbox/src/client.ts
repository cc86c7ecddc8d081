import {
  CLOSE_ERASED,
  CLOSE_TOKEN_EXPIRED,
  type Counts,
  type InboxItem,
  type InboxPage,
  type Mark,
  SOCKET_PROTOCOL,
  type SocketMessage,
  type Target,
} from './wire.ts'

export * from './wire.ts'

/** Where the client's connection stands: loading and opening the socket, live, or waiting to try again. */
export type ConnectionState = 'connecting' | 'live' | 'offline'

/** How an InboxClient reaches the Worker and its user's token. */
export type InboxClientOptions = {
  /** The notify-edge Worker's address, e.g. `https://notify.example.com`. */
  url: string
  /**
   * Gives a token for the signed-in user, signed by the host application
   * (docs/inbox.md): asked at the start, when the Worker says the token ended,
   * and before a reconnect when the one held ends within a minute.
   */
  token: () => Promise<string> | string
  /** Items a page loads (at most 100). */
  pageSize?: number
  /**
   * A `ping` goes every this many seconds; a socket that answers nothing
   * within as many again is taken for dead (a network that dropped without
   * closing it) and replaced.
   */
  heartbeatSeconds?: number
  /** The WebSocket constructor (Node 22's global one, or a browser's). */
  WebSocket?: typeof WebSocket
}

/** A refusal of the inbox API: its status and the Worker's error code. */
export class InboxError extends Error {
  readonly status: number
  readonly code: string

  constructor(status: number, code: string, message: string) {
    super(message)
    this.name = 'InboxError'
    this.status = status
    this.code = code
  }
}

/** The longest wait between two tries to reconnect, in milliseconds. */
const RETRY_MAX_MS = 15_000

/**
 * One user's feed, live: the first pages of items (newest first, archived
 * ones left out), the unseen and unread counts, and marks. It loads a page,
 * then holds a socket that sends every change; a socket that drops or goes
 * silent is replaced, and the new one sends what changed meanwhile (each item
 * once, as it is now), so the copy ends as the feed is. Another tab's marks
 * arrive the same way.
 *
 * Events: `change` when the items or counts changed, `state` when the
 * connection's state did, and `added` (a CustomEvent with the item) for each
 * item that arrived while the client was open.
 */
export class InboxClient extends EventTarget {
  /** The items held, newest first; archived items are left out. */
  items: InboxItem[] = []
  counts: Counts = { unseen: 0, unread: 0 }
  state: ConnectionState = 'connecting'
  /** Whether older items are left to load (`loadMore`). */
  hasMore = false

  readonly #options: Required<Omit<InboxClientOptions, 'WebSocket'>> & { WebSocket: typeof WebSocket }
  #token: string | undefined
  #feed: string | undefined
  #version = 0
  #nextBefore: number | null = null
  #socket: WebSocket | undefined
  #retries = 0
  #retryTimer: ReturnType<typeof setTimeout> | undefined
  #heartbeat: ReturnType<typeof setInterval> | undefined
  #deadline: ReturnType<typeof setTimeout> | undefined
  #stopped = false
  /**
   * Counts each start of a load or a socket: an await that comes back to an
   * older one than the latest lets it go, so that two never run at once (a
   * retry and the browser's `online`, a reset and a page of `loadMore`).
   */
  #generation = 0
  /** Counts the copy's loads from the first page: a page of `loadMore` read across one belongs to the old copy. */
  #loads = 0
  #online = () => this.#reconnectNow()

  constructor(options: InboxClientOptions) {
    super()
    this.#options = {
      pageSize: 20,
      heartbeatSeconds: 30,
      WebSocket: globalThis.WebSocket,
      ...options,
      url: options.url.replace(/\/+$/, ''),
    }
  }

  /** Loads the first page and opens the socket. A failure to reach the Worker is retried, not thrown. */
  async start(): Promise<void> {
    this.#stopped = false
    globalThis.addEventListener?.('online', this.#online)
    await this.#load()
  }

  /** Closes the socket and stops trying. */
  stop(): void {
    this.#stopped = true
    globalThis.removeEventListener?.('online', this.#online)
    clearTimeout(this.#retryTimer)
    this.#drop()
  }

  /** Loads the next older page. */
  async loadMore(): Promise<void> {
    const before = this.#nextBefore
    if (before === null) return
    const loads = this.#loads
    let page = await this.#page(before)
    // A page read before a change the socket already brought would put back what that change took (a mark on
    // all, an archive): it is read again.
    for (let tries = 1; page.feed === this.#feed && page.version < this.#version && tries < 3; tries += 1) {
      page = await this.#page(before)
    }
    // The copy was read again meanwhile (a reset, another feed): this page belongs to the old one.
    if (loads !== this.#loads || this.#nextBefore !== before || this.#stopped) return
    if (page.feed !== this.#feed) return this.#reload()
    for (const item of page.items) this.#upsert(item, true)
    this.#nextBefore = page.nextBefore
    this.hasMore = page.nextBefore !== null
    this.#changed()
  }

  /** Marks items seen (by id, or all). */
  markSeen(target: Target): Promise<void> {
    return this.#mark('seen', target)
  }

  /** Marks items read, and so seen. */
  markRead(target: Target): Promise<void> {
    return this.#mark('read', target)
  }

  /** Archives items: they leave the list and the counts. */
  archive(target: Target): Promise<void> {
    return this.#mark('archived', target)
  }

  /** Puts the mark on the copy at once, then asks the Worker; the socket brings the counts (every tab's). */
  async #mark(mark: Mark, target: Target): Promise<void> {
    this.#markHeld(mark, target, new Date().toISOString())
    this.#changed()
    let answer: { counts: Counts }
    try {
      answer = (await this.#call('POST', `/v1/inbox/${mark}`, target)) as { counts: Counts }
    } catch (error) {
      // The mark shown at once did not happen: the copy is read again, so that it shows what the feed holds.
      void this.#reload()
      throw error
    }
    // Without a live socket nothing else brings the counts.
    if (this.state !== 'live') {
      this.counts = answer.counts
      this.#changed()
    }
  }

  /** Loads the first page and opens the socket; on failure, tries again later. */
  async #load(): Promise<void> {
    const generation = ++this.#generation
    this.#loads += 1
    this.#setState('connecting')
    try {
      const page = await this.#page()
      if (generation !== this.#generation || this.#stopped) return
      this.items = []
      for (const item of page.items) this.#upsert(item, true)
      this.#feed = page.feed
      this.#version = page.version
      this.counts = page.counts
      this.#nextBefore = page.nextBefore
      this.hasMore = page.nextBefore !== null
      this.#changed()
      await this.#open()
    } catch {
      this.#retryLater()
    }
  }

  /** Throws the copy away and reads it again (another feed, or a socket that said to start over). */
  async #reload(): Promise<void> {
    this.#drop()
    this.#feed = undefined
    this.#version = 0
    await this.#load()
  }

  /** Opens a socket that catches up from the version held. */
  async #open(): Promise<void> {
    if (this.#stopped) return
    const generation = ++this.#generation
    const token = await this.#freshToken()
    if (generation !== this.#generation || this.#stopped) return
    // One socket at a time: one still opening is let go.
    this.#drop()
    const query = new URLSearchParams({ after: String(this.#version) })
    if (this.#feed !== undefined) query.set('feed', this.#feed)
    const socket = new this.#options.WebSocket(`${this.#options.url.replace(/^http/, 'ws')}/v1/inbox/socket?${query}`, [
      SOCKET_PROTOCOL,
      `bearer.${token}`,
    ])
    this.#socket = socket
    let told = false
    // A socket that neither opens nor closes (a network that drops packets) is given up like a silent one.
    this.#expectAnswer(socket)
    socket.addEventListener('message', (event) => {
      if (this.#socket !== socket) return
      this.#alive()
      if (event.data === 'pong') return
      told = true
      this.#apply(JSON.parse(String(event.data)) as SocketMessage)
    })
    socket.addEventListener('close', (event) => {
      if (this.#socket !== socket) return
      this.#drop()
      // Closed before it said anything: the upgrade may have been refused for the token (a browser sees only
      // 1006), so the next try asks the host for a new one.
      if (!told) this.#token = undefined
      if (event.code === CLOSE_TOKEN_EXPIRED) {
        this.#token = undefined
        void this.#open().catch(() => this.#retryLater())
      } else if (event.code === CLOSE_ERASED) void this.#reload()
      else this.#retryLater()
    })
    socket.addEventListener('open', () => {
      if (this.#socket !== socket) return
      this.#heartbeat = setInterval(() => this.#ping(socket), this.#options.heartbeatSeconds * 1000)
    })
  }

  /** Applies what the socket said. */
  #apply(message: SocketMessage): void {
    switch (message.type) {
      case 'missed':
        for (const item of message.items) this.#upsert(item, false)
        this.#changed()
        return
      case 'state':
        if (message.reset) {
          void this.#reload()
          return
        }
        this.#feed = message.feed
        this.#setCounts(message.counts, message.version)
        this.#retries = 0
        this.#setState('live')
        this.#changed()
        return
      case 'added': {
        const fresh = !this.items.some((held) => held.id === message.item.id)
        this.#upsert(message.item, false)
        this.#setCounts(message.counts, message.version)
        this.#changed()
        if (fresh) this.dispatchEvent(new CustomEvent('added', { detail: message.item }))
        return
      }
      case 'marked':
        this.#markHeld(message.mark, 'all' in message ? { all: true } : { ids: message.ids }, message.at)
        this.#setCounts(message.counts, message.version)
        this.#changed()
        return
      case 'removed': {
        const gone = new Set(message.ids)
        this.items = this.items.filter((item) => !gone.has(item.id))
        this.#setCounts(message.counts, message.version)
        this.#changed()
        return
      }
    }
  }

  /** Takes the counts of a change no older than the last one taken. */
  #setCounts(counts: Counts, version: number): void {
    if (version < this.#version) return
    this.counts = counts
    this.#version = version
  }

  /**
   * Puts an item in its place (newest first), replacing an older copy of it;
   * an archived one leaves. An item older than every item held, while older
   * pages are left to load, waits for its page (`fromPage` items are that page).
   */
  #upsert(item: InboxItem, fromPage: boolean): void {
    const at = this.items.findIndex((held) => held.id === item.id)
    if (at >= 0) {
      if ((this.items[at] as InboxItem).version > item.version) return
      this.items.splice(at, 1)
    }
    if (item.archivedAt !== null) return
    const oldest = this.items.at(-1)
    if (!fromPage && at < 0 && this.hasMore && oldest !== undefined && item.seq < oldest.seq) return
    // The feed's order: by place, newest first.
    const place = this.items.findIndex((held) => held.seq < item.seq)
    this.items.splice(place < 0 ? this.items.length : place, 0, item)
  }

  /** Puts a mark on the items held that lack it (reading sees; archiving removes). */
  #markHeld(mark: Mark, target: Target, at: string): void {
    const ids = 'all' in target ? undefined : new Set(target.ids)
    const chosen = (item: InboxItem) => ids === undefined || ids.has(item.id)
    if (mark === 'archived') {
      this.items = this.items.filter((item) => !chosen(item))
      return
    }
    this.items = this.items.map((item) => {
      if (!chosen(item)) return item
      const seenAt = item.seenAt ?? at
      return mark === 'read' ? { ...item, seenAt, readAt: item.readAt ?? at } : { ...item, seenAt }
    })
  }

  /** A page of the feed (the first, or the one before `before`). */
  async #page(before?: number): Promise<InboxPage> {
    const query = new URLSearchParams({ limit: String(this.#options.pageSize) })
    if (before !== undefined) query.set('before', String(before))
    return (await this.#call('GET', `/v1/inbox?${query}`)) as InboxPage
  }

  /** An API call with the token; a token the Worker calls ended or wrong is asked for again, once. */
  async #call(method: string, path: string, body?: unknown): Promise<unknown> {
    for (let attempt = 1; ; attempt += 1) {
      const response = await fetch(`${this.#options.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${await this.#freshToken()}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        // A mark made by following an item's link must outlive the page it leaves.
        keepalive: method === 'POST',
      })
      if (response.ok) return response.json()
      const problem = (await response.json().catch(() => ({}))) as { error?: { code?: string; message?: string } }
      if (response.status === 401 && attempt === 1) {
        this.#token = undefined
        continue
      }
      throw new InboxError(
        response.status,
        problem.error?.code ?? 'UNKNOWN',
        problem.error?.message ?? `the inbox answered ${response.status}`,
      )
    }
  }

  /** The token held, or a new one when there is none or it ends within a minute. */
  async #freshToken(): Promise<string> {
    if (this.#token === undefined || secondsLeft(this.#token) < 60) this.#token = await this.#options.token()
    return this.#token
  }

  /** Sends a ping, and gives the socket as long again to answer anything. */
  #ping(socket: WebSocket): void {
    try {
      socket.send('ping')
    } catch {}
    this.#expectAnswer(socket)
  }

  /** Gives the socket heartbeatSeconds to say something, or replaces it. */
  #expectAnswer(socket: WebSocket): void {
    if (this.#deadline !== undefined) return
    this.#deadline = setTimeout(() => {
      this.#deadline = undefined
      if (this.#socket !== socket) return
      this.#drop()
      this.#retryLater()
    }, this.#options.heartbeatSeconds * 1000)
  }

  /** The socket said something: it is alive. */
  #alive(): void {
    clearTimeout(this.#deadline)
    this.#deadline = undefined
  }

  /** Lets go of the socket (closing it when it can), its heartbeat and deadline. */
  #drop(): void {
    clearInterval(this.#heartbeat)
    this.#alive()
    const socket = this.#socket
    this.#socket = undefined
    try {
      socket?.close()
    } catch {}
    if (!this.#stopped) this.#setState('offline')
  }

  /** Tries again after a wait that doubles with each failure (with jitter), up to RETRY_MAX_MS. */
  #retryLater(): void {
    if (this.#stopped) return
    this.#setState('offline')
    clearTimeout(this.#retryTimer)
    const wait = Math.min(RETRY_MAX_MS, 500 * 2 ** this.#retries) * (0.5 + Math.random() / 2)
    this.#retries += 1
    this.#retryTimer = setTimeout(() => this.#resume(), wait)
  }

  /** The browser says the network is back: try now rather than at the next retry. */
  #reconnectNow(): void {
    if (this.#stopped || this.state === 'live') return
    clearTimeout(this.#retryTimer)
    this.#resume()
  }

  /** Reopens the socket from the version held (or loads afresh when nothing was loaded yet). */
  #resume(): void {
    if (this.#feed === undefined) void this.#load()
    else void this.#open().catch(() => this.#retryLater())
  }

  #setState(state: ConnectionState): void {
    if (this.state === state) return
    this.state = state
    this.dispatchEvent(new Event('state'))
  }

  #changed(): void {
    this.dispatchEvent(new Event('change'))
  }
}

/** Seconds until a JWT's `exp` (0 when it cannot be read: the token is asked for again). */
function secondsLeft(token: string): number {
  try {
    const payload = token.split('.')[1] ?? ''
    const json = atob(payload.replace(/-/g, '+').replace(/_/g, '/'))
    const exp = (JSON.parse(json) as { exp?: unknown }).exp
    return typeof exp === 'number' ? exp - Date.now() / 1000 : 0
  } catch {
    return 0
  }
}
