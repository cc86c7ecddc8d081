import type { Config } from '../config.ts'
import { dispatchFor } from '../dispatch/message.ts'
import { pseudonymOf } from '../erasure/pseudonym.ts'
import type { Urgency } from '../events/define.ts'
import type { Logger } from '../log.ts'
import {
  type AwaitingRow,
  failAwaiting,
  type Release,
  releaseAwaiting,
  selectReleasable,
} from '../notifications/contact-wait.ts'
import { type Outgoing, sendAll } from '../queue/send.ts'
import { loadContext } from './context.ts'
import { renderNotification } from './render-notification.ts'

/** Waiting notifications released per call; the cron takes the rest a minute later. */
const RELEASE_BATCH = 200

/**
 * Releases the notifications that waited for a contact which exists now —
 * those of `userIds` (a contact batch just written), or any (the cron's
 * sweep, which also catches contacts put by an operator): each is rendered
 * for its contact exactly as planning would have, written `pending` at its
 * send time, and put on the dispatch queue. A notification whose template
 * cannot be rendered ends `failed` with that code. If the queue refuses, the
 * rows are `pending` already and the cron enqueues them after its grace.
 *
 * @returns how many were released
 */
export async function releaseWaiting(
  env: Env,
  config: Config,
  userIds: readonly string[] | null,
  now: Date,
  log: Logger,
): Promise<number> {
  if (userIds?.length === 0) return 0
  const { results: rows } = await selectReleasable(env.DB, userIds, RELEASE_BATCH).all<AwaitingRow>()
  if (rows.length === 0) return 0
  const context = await loadContext(env.DB, {
    keys: [],
    userIds: [...new Set(rows.map((row) => row.recipient_user_id))],
    needPool: false,
    kinds: [...new Set(rows.map((row) => row.kind))],
    decisionPersons: [],
  })
  const nowIso = now.toISOString()
  const statements: D1PreparedStatement[] = []
  const outgoing: (Outgoing | undefined)[] = []
  for (const row of rows) {
    const made = await releaseOf(row, context, config, now)
    if ('error' in made) {
      statements.push(failAwaiting(env.DB, row.id, made.error.code, made.error.message, nowIso))
      outgoing.push(undefined)
      log.warn('notification.release-failed', { notificationId: row.id, kind: row.kind, code: made.error.code })
    } else {
      statements.push(releaseAwaiting(env.DB, made, nowIso))
      outgoing.push(dispatchFor(row.id, made.scheduledAt, now))
    }
  }
  const written = await env.DB.batch(statements)
  // Only what this call released goes on the queue: a concurrent release of the same row wrote nothing here.
  const released = outgoing.filter(
    (message, index): message is Outgoing => message !== undefined && (written[index]?.meta.changes ?? 0) > 0,
  )
  await sendAll(env.DISPATCH, released)
  if (released.length > 0) log.info('notification.released', { count: released.length })
  return released.length
}

async function releaseOf(
  row: AwaitingRow,
  context: Awaited<ReturnType<typeof loadContext>>,
  config: Config,
  now: Date,
) {
  const contact = context.contacts.get(row.recipient_user_id)
  const locale = contact?.locale ?? config.DEFAULT_LOCALE
  const timeZone = contact?.timeZone ?? config.DEFAULT_TIME_ZONE
  const made = await renderNotification(
    { kind: row.kind, urgency: row.urgency as Urgency, model: JSON.parse(row.model ?? '{}') },
    { userId: row.recipient_user_id, name: contact?.displayName ?? null, locale, timeZone },
    { channel: row.channel, isFallback: row.is_fallback === 1 },
    context.templates,
    config,
    now,
  )
  if ('error' in made) return made
  const email = contact?.email as string
  const release: Release = {
    id: row.id,
    email,
    recipientHash: await pseudonymOf(email, config.erasureKey),
    name: contact?.displayName ?? null,
    locale: made.locale,
    timeZone,
    subject: made.subject,
    textBody: made.textBody,
    htmlBody: made.htmlBody,
    templateVersion: made.templateVersion,
    unsubscribeUrl: made.unsubscribeUrl,
    scheduledAt: made.scheduledAt,
  }
  return release
}
