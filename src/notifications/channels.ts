/**
 * The channels a notification goes by. `email` through the configured email
 * transport; `in-app` into the recipient's feed (src/inbox/), where a
 * notification is an item: its `subject` is the item's title, its text body
 * the item's body, and its HTML body the item's link and action as JSON
 * (`{"link": …, "action": {"label": …, "url": …}}`, either null) — the same
 * columns, so retention and erasure remove an item's content as they remove
 * an email's.
 */
export const CHANNELS = ['email', 'in-app'] as const

/** A channel. */
export type Channel = (typeof CHANNELS)[number]

/**
 * What only email has, as a condition on a notification row: a suppressed
 * address, a paused transport, an unknown outcome and a provider's
 * idempotency window are about mail; an item added to a feed is added once
 * however often it is delivered, so none of them holds one back.
 */
export const BY_EMAIL = "channel = 'email'"
