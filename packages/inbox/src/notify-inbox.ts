import { type ConnectionState, InboxClient, type InboxItem } from './client.ts'

/** The texts of the element, in the languages it speaks (`lang="ru"`, else English). */
const TEXTS = {
  en: {
    title: 'Notifications',
    bell: (unread: number) => (unread === 0 ? 'Notifications' : `Notifications, ${unread} unread`),
    readAll: 'Mark all read',
    read: 'Mark read',
    archive: 'Archive',
    unread: 'Unread',
    more: 'Show older',
    empty: 'Nothing here yet.',
    offline: 'Offline: reconnecting…',
    connecting: 'Loading…',
    arrived: (title: string) => `New notification: ${title}`,
  },
  ru: {
    title: 'Уведомления',
    bell: (unread: number) => (unread === 0 ? 'Уведомления' : `Уведомления, непрочитанных: ${unread}`),
    readAll: 'Прочитать все',
    read: 'Прочитано',
    archive: 'В архив',
    unread: 'Не прочитано',
    more: 'Показать старые',
    empty: 'Здесь пока пусто.',
    offline: 'Нет связи: переподключаемся…',
    connecting: 'Загрузка…',
    arrived: (title: string) => `Новое уведомление: ${title}`,
  },
} as const

type Texts = (typeof TEXTS)[keyof typeof TEXTS]

const STYLE = `
:host { position: relative; display: inline-block; font: 14px/1.4 system-ui, sans-serif; color: #1a1a1a; }
[hidden] { display: none !important; }
.hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
button { font: inherit; cursor: pointer; }
.bell { position: relative; width: 44px; height: 44px; border: 1px solid #767676; border-radius: 50%; background: #fff; color: inherit; }
.bell svg { width: 22px; height: 22px; vertical-align: middle; }
.badge { position: absolute; top: -4px; right: -4px; min-width: 20px; padding: 0 5px; border-radius: 10px; background: #b00020; color: #fff; font-size: 12px; line-height: 20px; }
.panel { position: absolute; right: 0; top: 52px; z-index: 1000; width: min(380px, calc(100vw - 16px)); max-height: min(560px, 80vh); overflow-y: auto; box-sizing: border-box; background: #fff; border: 1px solid #767676; border-radius: 8px; box-shadow: 0 8px 24px rgb(0 0 0 / 0.18); }
@media (max-width: 480px) { .panel { position: fixed; left: 8px; right: 8px; top: 60px; width: auto; } }
header { display: flex; align-items: center; justify-content: space-between; gap: 8px; padding: 8px 12px; border-bottom: 1px solid #ddd; }
h2 { margin: 0; font-size: 16px; }
ul { list-style: none; margin: 0; padding: 0; }
li { padding: 10px 12px; border-bottom: 1px solid #eee; overflow-wrap: anywhere; }
li.unread { background: #eef4ff; }
h3 { margin: 0 0 4px; font-size: 14px; }
li.unread h3::before { content: ''; display: inline-block; width: 8px; height: 8px; margin-right: 6px; border-radius: 50%; background: #0b57d0; }
p { margin: 0 0 6px; }
time { color: #555; font-size: 12px; }
a { color: #0b57d0; }
.actions { display: flex; flex-wrap: wrap; gap: 8px; margin-top: 6px; }
.actions button, .actions a, header button, .more { padding: 4px 10px; min-height: 32px; box-sizing: border-box; border: 1px solid #767676; border-radius: 4px; background: #fff; color: #1a1a1a; text-decoration: none; display: inline-flex; align-items: center; }
.actions a.action { background: #0b57d0; border-color: #0b57d0; color: #fff; }
.status, .empty { padding: 8px 12px; margin: 0; color: #555; }
.more { margin: 8px 12px; }
:focus-visible { outline: 3px solid #0b57d0; outline-offset: 2px; }
`

const BELL = `<svg viewBox="0 0 24 24" aria-hidden="true" focusable="false"><path fill="currentColor" d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22Zm7-6V11a7 7 0 0 0-5.5-6.84V3.5a1.5 1.5 0 0 0-3 0v.66A7 7 0 0 0 5 11v5l-2 2v1h18v-1l-2-2Z"/></svg>`

/**
 * `<notify-inbox>`: a bell with the unread count, and a panel of the user's
 * notifications, live. Drop it into any page:
 *
 * ```html
 * <script type="module" src="https://notify.example.com/inbox-client/0.1.0/notify-inbox.js"></script>
 * <notify-inbox src="https://notify.example.com" token-url="/notify-token"></notify-inbox>
 * ```
 *
 * `src` is the Worker; `token-url` an address of the host application that
 * answers its signed-in user's inbox token (as text, or JSON `{"token"}`),
 * asked with the page's cookies. A page may instead set the `tokenProvider`
 * property to a function giving the token. `lang="ru"` (on it or a parent)
 * speaks Russian. `heartbeat-seconds` (30 by default) is how often the socket
 * is pinged, and how long it may stay silent before it is replaced.
 * Opening the panel marks what it shows seen; following an item's link or
 * action marks it read. Escape closes the panel and gives focus back to the
 * bell; a new item is announced to screen readers.
 */
export class NotifyInbox extends HTMLElement {
  // `declare`: no class field, which would wipe a value a page set on the element before it was upgraded
  // (a classic script runs before the module that defines the element).
  /** Gives the signed-in user's token; set by a page that does not use `token-url`. */
  declare tokenProvider: (() => Promise<string> | string) | undefined
  /** The client the element draws, once connected: a page may read it (`items`, `counts`) or listen to it. */
  declare client: InboxClient | undefined

  readonly #root: ShadowRoot
  #texts: Texts = TEXTS.en
  #rows = new Map<string, HTMLLIElement>()
  /** Closes the panel on a click elsewhere in the page; added while connected. */
  #outside = (event: Event) => {
    if (!this.#panel().hidden && !event.composedPath().includes(this)) this.toggle(false)
  }

  constructor() {
    super()
    this.#root = this.attachShadow({ mode: 'open' })
  }

  connectedCallback(): void {
    document.addEventListener('click', this.#outside)
    this.#texts = this.closest('[lang]')?.getAttribute('lang')?.startsWith('ru') ? TEXTS.ru : TEXTS.en
    this.#draw()
    const url = this.getAttribute('src')
    if (url === null) return
    const heartbeat = Number(this.getAttribute('heartbeat-seconds'))
    const client = new InboxClient({
      url,
      token: () => this.#token(),
      ...(heartbeat > 0 ? { heartbeatSeconds: heartbeat } : {}),
    })
    this.client = client
    client.addEventListener('change', () => this.#update())
    client.addEventListener('state', () => this.#showState(client.state))
    client.addEventListener('added', (event) => {
      this.#part('.announce').textContent = this.#texts.arrived((event as CustomEvent<InboxItem>).detail.title)
    })
    // Started after the current task: a page that sets `tokenProvider` right after adding the element is in time.
    queueMicrotask(() => {
      if (this.client === client) void client.start()
    })
  }

  disconnectedCallback(): void {
    document.removeEventListener('click', this.#outside)
    this.client?.stop()
    this.client = undefined
    this.#rows.clear()
  }

  /** Opens or closes the panel; opening marks what it shows seen. */
  toggle(open = this.#panel().hidden): void {
    const panel = this.#panel()
    panel.hidden = !open
    this.#bell().setAttribute('aria-expanded', String(open))
    if (open && (this.client?.counts.unseen ?? 0) > 0) void this.client?.markSeen({ all: true }).catch(() => {})
  }

  async #token(): Promise<string> {
    if (this.tokenProvider) return this.tokenProvider()
    const address = this.getAttribute('token-url')
    if (address === null) throw new Error('notify-inbox: set token-url or tokenProvider')
    const response = await fetch(address, { credentials: 'include' })
    if (!response.ok) throw new Error(`notify-inbox: the token address answered ${response.status}`)
    const text = (await response.text()).trim()
    return text.startsWith('{') ? (JSON.parse(text) as { token: string }).token : text
  }

  #draw(): void {
    const t = this.#texts
    this.#root.innerHTML = `<style>${STYLE}</style>
<button class="bell" type="button" aria-expanded="false" aria-controls="panel">${BELL}<span class="badge" hidden></span><span class="hidden label"></span></button>
<section id="panel" class="panel" aria-labelledby="heading" hidden>
  <header><h2 id="heading" tabindex="-1"></h2><button class="read-all" type="button"></button></header>
  <p class="status" role="status"></p>
  <ul></ul>
  <p class="empty"></p>
  <button class="more" type="button" hidden></button>
</section>
<div class="announce hidden" aria-live="polite"></div>`
    this.#part('h2').textContent = t.title
    this.#part('.read-all').textContent = t.readAll
    this.#part('.more').textContent = t.more
    this.#part('.empty').textContent = t.empty
    this.#bell().addEventListener('click', () => this.toggle())
    this.#part('.read-all').addEventListener('click', () => {
      // The button hides once nothing is unread: the focus goes to the panel's heading rather than be lost.
      this.#part('h2').focus()
      void this.client?.markRead({ all: true }).catch(() => {})
    })
    this.#part('.more').addEventListener('click', () => void this.client?.loadMore().catch(() => {}))
    this.#root.addEventListener('keydown', (event) => {
      if ((event as KeyboardEvent).key !== 'Escape' || this.#panel().hidden) return
      this.toggle(false)
      this.#bell().focus()
    })
    this.#update()
    this.#showState('connecting')
  }

  /** Draws the counts and the items, reusing each item's row so that focus stays where it was. */
  #update(): void {
    const t = this.#texts
    const client = this.client
    const unread = client?.counts.unread ?? 0
    const badge = this.#part('.badge')
    badge.hidden = unread === 0
    badge.textContent = unread > 99 ? '99+' : String(unread)
    badge.setAttribute('aria-hidden', 'true')
    this.#part('.label').textContent = t.bell(unread)
    const items = client?.items ?? []
    const list = this.#part('ul')
    const keep = new Set(items.map((item) => item.id))
    for (const [id, row] of this.#rows) {
      if (!keep.has(id)) {
        row.remove()
        this.#rows.delete(id)
      }
    }
    items.forEach((item, index) => {
      const row = this.#rows.get(item.id) ?? this.#row(item)
      this.#fill(row, item)
      if (list.children[index] !== row) list.insertBefore(row, list.children[index] ?? null)
    })
    this.#part('.empty').hidden = items.length > 0
    this.#part('.more').hidden = !client?.hasMore
    this.#part('.read-all').hidden = unread === 0
  }

  /** A new row for an item. */
  #row(item: InboxItem): HTMLLIElement {
    const row = document.createElement('li')
    row.dataset.id = item.id
    row.innerHTML = `<article><h3></h3><p class="body"></p><time></time><div class="actions"></div></article>`
    this.#rows.set(item.id, row)
    return row
  }

  /** Writes an item into its row (texts as text, never as HTML: they are the producer's values). */
  #fill(row: HTMLLIElement, item: InboxItem): void {
    const t = this.#texts
    const unread = item.readAt === null
    row.classList.toggle('unread', unread)
    const heading = row.querySelector('h3') as HTMLHeadingElement
    // Rebuilt only when it changes: a change elsewhere in the feed must not take the focus off its link.
    const headingKey = `${unread}|${item.title}|${item.link ?? ''}`
    if (heading.dataset.key !== headingKey) {
      heading.dataset.key = headingKey
      heading.replaceChildren()
      if (unread)
        heading.append(
          Object.assign(document.createElement('span'), { className: 'hidden', textContent: `${t.unread}: ` }),
        )
      if (item.link) heading.append(this.#anchor(item.link, item.title, item.id))
      else heading.append(item.title)
    }
    const body = row.querySelector('.body') as HTMLParagraphElement
    body.textContent = item.body
    body.hidden = item.body === ''
    const time = row.querySelector('time') as HTMLTimeElement
    time.dateTime = item.createdAt
    time.textContent = new Date(item.createdAt).toLocaleString(this.#texts === TEXTS.ru ? 'ru' : undefined, {
      dateStyle: 'medium',
      timeStyle: 'short',
    })
    const actions = row.querySelector('.actions') as HTMLDivElement
    const key = `${unread}|${item.action?.url ?? ''}|${item.action?.label ?? ''}`
    if (actions.dataset.key === key) return
    actions.dataset.key = key
    // The focused button (Mark read) goes with the rebuild: the focus moves to the row's Archive button.
    const hadFocus = actions.contains(this.#root.activeElement)
    actions.replaceChildren()
    if (item.action) {
      const action = this.#anchor(item.action.url, item.action.label, item.id)
      action.className = 'action'
      actions.append(action)
    }
    if (unread) {
      actions.append(this.#button(t.read, `${t.read}: ${item.title}`, () => this.client?.markRead({ ids: [item.id] })))
    }
    const archive = this.#button(t.archive, `${t.archive}: ${item.title}`, () =>
      this.client?.archive({ ids: [item.id] }),
    )
    actions.append(archive)
    if (hadFocus) archive.focus()
  }

  /** A link that marks its item read when followed. */
  #anchor(href: string, text: string, id: string): HTMLAnchorElement {
    const anchor = document.createElement('a')
    anchor.href = href
    anchor.textContent = text
    anchor.addEventListener('click', () => void this.client?.markRead({ ids: [id] }).catch(() => {}))
    return anchor
  }

  #button(text: string, label: string, act: () => Promise<void> | undefined): HTMLButtonElement {
    const button = document.createElement('button')
    button.type = 'button'
    button.textContent = text
    button.setAttribute('aria-label', label)
    button.addEventListener('click', () => void act()?.catch(() => {}))
    return button
  }

  #showState(state: ConnectionState): void {
    const status = this.#part('.status')
    status.textContent = state === 'live' ? '' : state === 'offline' ? this.#texts.offline : this.#texts.connecting
    status.hidden = state === 'live'
    this.dataset.state = state
  }

  #bell(): HTMLButtonElement {
    return this.#part('.bell') as HTMLButtonElement
  }

  #panel(): HTMLElement {
    return this.#part('.panel')
  }

  #part(selector: string): HTMLElement {
    return this.#root.querySelector(selector) as HTMLElement
  }
}

if (!customElements.get('notify-inbox')) customElements.define('notify-inbox', NotifyInbox)

declare global {
  interface HTMLElementTagNameMap {
    'notify-inbox': NotifyInbox
  }
}
