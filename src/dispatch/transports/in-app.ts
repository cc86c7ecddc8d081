import { type NewItem, NewItemSchema } from '../../inbox/item.ts'
import type { ClaimedRow } from '../../notifications/claim.ts'
import { type Courier, SendError } from './types.ts'

/** What an in-app notification's HTML body holds: its item's link and action (src/notifications/channels.ts). */
type Extras = { link?: string | null; action?: { label: string; url: string } | null }

/** The feed item a claimed in-app notification is, or why it cannot be one. */
export function itemOf(row: ClaimedRow, createdAt: string): NewItem {
  let extras: Extras = {}
  try {
    extras = row.html_body ? (JSON.parse(row.html_body) as Extras) : {}
  } catch {
    throw invalid('its link and action are not JSON')
  }
  const parsed = NewItemSchema.safeParse({
    notificationId: row.id,
    kind: row.kind,
    title: row.subject ?? '',
    body: row.text_body ?? '',
    link: extras.link ?? null,
    action: extras.action ?? null,
    createdAt,
    notifiedAt: row.created_at,
  })
  if (!parsed.success) {
    const field = parsed.error.issues[0]?.path.join('.') ?? 'item'
    throw invalid(`its ${field} is not what a feed item takes: ${parsed.error.issues[0]?.message ?? 'invalid'}`)
  }
  return parsed.data
}

function invalid(why: string): SendError {
  return new SendError(`the in-app item cannot be shown: ${why}`, 'permanent', { code: 'NTF_MESSAGE_INVALID' })
}

/**
 * The recipient's in-app feed as the send stage calls it: each notification
 * becomes an item of its recipient's feed (src/inbox/inbox-feed.ts), which
 * adds it once however often it is delivered — so a lost answer is simply
 * delivered again, never an unknown outcome, and nothing here is paced,
 * bundled or paused. An item the feed cannot take (an empty title, a link
 * that is no http(s) address) is refused for good (`NTF_MESSAGE_INVALID`);
 * a failing call to the object is transient and tried again.
 */
export function inAppCourier(env: Env, now: () => string = () => new Date().toISOString()): Courier {
  return {
    name: 'in-app',
    async deliver(row) {
      // When it reached the feed: a delivery again adds nothing, so the first time is the one kept.
      const item = itemOf(row, now())
      await env.INBOX.getByName(row.recipient_user_id).add(item)
      return { providerId: null, raw: '', messageId: '' }
    },
  }
}
