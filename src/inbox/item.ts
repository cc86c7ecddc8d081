import { z } from 'zod'

/** The most a title holds, in characters: a line of a bell's panel. */
export const TITLE_MAX = 200
/** The most a body holds, in characters: a few sentences, not an email. */
export const BODY_MAX = 2000
/** The most an item's link or action address holds. */
export const URL_MAX = 2048
/** The most an action's label holds: a button. */
export const LABEL_MAX = 60

const Address = z
  .url({ protocol: /^https?$/ })
  .max(URL_MAX)
  .describe('an http(s) address the item opens')

/**
 * An item as dispatch hands it to a recipient's feed: one per notification,
 * its rendered in-app template (title, body, an optional link and action).
 */
export const NewItemSchema = z.object({
  notificationId: z.string().min(1).max(128).describe('the notification this item shows: one item per notification'),
  kind: z.string().min(1).max(100).describe('its kind, e.g. ResponseCreated'),
  title: z.string().min(1).max(TITLE_MAX),
  body: z.string().max(BODY_MAX).default(''),
  link: Address.nullable().default(null),
  action: z
    .object({ label: z.string().min(1).max(LABEL_MAX), url: Address })
    .nullable()
    .default(null)
    .describe('one button beside the item'),
  createdAt: z.iso.datetime().describe('when the item reached the feed (ISO, UTC)'),
  notifiedAt: z.iso
    .datetime()
    .optional()
    .describe('when its notification was made: one made before an erasure of the feed is refused'),
})

/** What dispatch adds to a feed. */
export type NewItem = z.input<typeof NewItemSchema>

/** An item of a feed as its recipient sees it. */
export type InboxItem = {
  /** The notification's id: the same in an event's story. */
  id: string
  kind: string
  title: string
  body: string
  link: string | null
  action: { label: string; url: string } | null
  createdAt: string
  seenAt: string | null
  readAt: string | null
  archivedAt: string | null
  /** The feed's change number of this item's last change: what a socket resumes after. */
  version: number
}

/** What a recipient has not seen or not read, of the items not archived. */
export type Counts = { unseen: number; unread: number }

/** The three marks a recipient puts on items. */
export const MARKS = ['seen', 'read', 'archived'] as const

/** One of the marks. */
export type Mark = (typeof MARKS)[number]

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
