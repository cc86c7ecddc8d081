/**
 * What the inbox's API and socket carry: the types and constants the Worker
 * (src/inbox/) and its browser client share, so that the two cannot disagree.
 */

/** The subprotocol an inbox socket speaks; a browser offers its token beside it (`bearer.<token>`). */
export const SOCKET_PROTOCOL = 'notify-edge.inbox'

/** The close code of a socket whose token ended: the client asks its host for a new token and comes back. */
export const CLOSE_TOKEN_EXPIRED = 4001

/** The close code of a socket whose feed was erased: the client throws its copy away. */
export const CLOSE_ERASED = 4002

/** The three marks a recipient puts on items. */
export const MARKS = ['seen', 'read', 'archived'] as const

/** One of the marks. */
export type Mark = (typeof MARKS)[number]

/** What a recipient has not seen or not read, of the items not archived. */
export type Counts = { unseen: number; unread: number }

/** An item of a feed as its recipient sees it. */
export type InboxItem = {
  /** The notification's id: the same in an event's story. */
  id: string
  kind: string
  title: string
  body: string
  link: string | null
  action: { label: string; url: string } | null
  /** Its place in the feed: each item added takes a larger one, and pages go by it, newest first. */
  seq: number
  createdAt: string
  seenAt: string | null
  readAt: string | null
  archivedAt: string | null
  /** The feed's change number of this item's last change: what a socket resumes after. */
  version: number
}

/** Which items a mark is for: these, or every item of the feed. */
export type Target = { ids: string[] } | { all: true }

/**
 * One change of a feed, as its sockets are told: an item added, a mark put
 * on items (by id, or on all of them), or items removed by retention, with the
 * counts after it and its change number (`version`), which orders every change
 * of the feed.
 */
export type FeedChange = { counts: Counts; version: number } & (
  | { type: 'added'; item: InboxItem }
  | { type: 'marked'; mark: Mark; at: string; ids: string[] }
  | { type: 'marked'; mark: Mark; at: string; all: true }
  | { type: 'removed'; ids: string[] }
)

/**
 * What a socket is sent. `missed`: items changed since the change number the
 * client came back with, each once as it is now, in the order of their last
 * change (in pages of at most 100). `state`: the feed's name, the counts and
 * the current change number, after the catch-up; `reset` when the client's
 * copy is to be thrown away and read again from the first page. Then every
 * change as it happens (FeedChange).
 */
export type SocketMessage =
  | { type: 'missed'; items: InboxItem[] }
  | { type: 'state'; feed: string; counts: Counts; version: number; reset: boolean }
  | FeedChange

/** A page of `GET /v1/inbox`. */
export type InboxPage = {
  items: InboxItem[]
  /** The feed's name: another one means it was erased and made again. */
  feed: string
  counts: Counts
  version: number
  /** What `?before=` takes for the next page; null on the last. */
  nextBefore: number | null
}
