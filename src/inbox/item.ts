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

/**
 * What the API and the socket carry — InboxItem, Counts, Mark, Target,
 * FeedChange, SocketMessage — are the browser client's wire types
 * (packages/inbox), so that the Worker and its client cannot disagree.
 */
export type { Counts, FeedChange, InboxItem, Mark, SocketMessage, Target } from '@notify-edge/inbox/wire'
export { MARKS } from '@notify-edge/inbox/wire'
