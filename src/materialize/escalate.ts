import type { Config } from '../config.ts'
import { notificationDeadLetter } from '../dead-letters/notification.ts'
import type { RecipientRef } from '../events/define.ts'
import type { EscalationDecision } from '../inbox/feed.ts'
import type { Logger } from '../log.ts'
import { failAwaiting } from '../notifications/contact-wait.ts'
import {
  type EscalatingRow,
  selectDueEscalations,
  spareEscalation,
  takeEscalation,
} from '../notifications/escalation.ts'
import { sendAll } from '../queue/send.ts'
import { notificationFor } from './plan-event.ts'
import { contextOfRows, intentOf } from './release-waiting.ts'
import { type SendsAfter, writeAgain } from './write-again.ts'

/**
 * Decides the escalations of these notifications whose wait has ended (those
 * still `escalating`; any other id is passed over): each recipient's feed
 * decides, once, whether the item was seen (or read) — then the email ends
 * `seen-in-app` — or not, and then the email is planned again as planning
 * would plan it now (the recipient's preferences, contact, digest, throttle
 * and quiet hours at this moment) and written in its place, carrying when the
 * feed decided. What it sends goes on the dispatch queue; if the queue
 * refuses, the rows are written already and the cron enqueues them after its
 * grace. A feed that does not answer throws, before anything is written:
 * the caller tries again, and the feed answers what it decided, if it did.
 *
 * @returns how many escalations were decided, by outcome
 */
export async function escalateDue(
  env: Env,
  config: Config,
  ids: readonly string[],
  now: Date,
  log: Logger,
): Promise<{ emailed: number; spared: number }> {
  const nowIso = now.toISOString()
  const { results: rows } = await selectDueEscalations(env.DB, ids, nowIso).all<EscalatingRow>()
  if (rows.length === 0) return { emailed: 0, spared: 0 }
  const decisions = await Promise.all(
    rows.map(
      (row): Promise<EscalationDecision> =>
        env.INBOX.getByName(row.recipient_user_id).escalate(
          row.escalation_of,
          row.escalation_unless,
          nowIso,
          row.scheduled_at,
        ),
    ),
  )
  const emailed = rows.filter((_, index) => decisions[index]?.email)
  const context = emailed.length === 0 ? undefined : await contextOfRows(env, emailed)
  const statements: D1PreparedStatement[] = []
  const letters: D1PreparedStatement[] = []
  const sends: SendsAfter[] = []
  let spared = 0
  for (const [index, row] of rows.entries()) {
    const decision = decisions[index] as EscalationDecision
    const escalation = { of: row.escalation_of, unless: row.escalation_unless, decidedAt: decision.decidedAt }
    if (!decision.email) {
      const markedAt = (row.escalation_unless === 'seen' ? decision.seenAt : decision.readAt) ?? decision.decidedAt
      statements.push(spareEscalation(env.DB, row.id, { ...escalation, markedAt }, nowIso))
      spared++
      continue
    }
    const made = await notificationFor(
      { source: row.source, event: { eventId: row.event_id, idempotencyKey: row.idempotency_key } },
      intentOf(row),
      recipientOf(row),
      row.channel,
      context as NonNullable<typeof context>,
      config,
      now,
    )
    if ('error' in made) {
      log.warn('notification.escalation-failed', { notificationId: row.id, kind: row.kind, code: made.error.code })
      statements.push(failAwaiting(env.DB, row.id, made.error.code, made.error.message, nowIso, 'escalating'))
      letters.push(
        await notificationDeadLetter(env.DB, row, {
          status: 'failed',
          code: made.error.code,
          error: made.error.message,
          attempts: 1,
          at: nowIso,
        }),
      )
      continue
    }
    sends.push(writeAgain(env.DB, takeEscalation(env.DB, row.id), { ...made, escalation }, statements, now))
  }
  // The dead letters after the writes, each written only if its notification's write applied.
  const written = await env.DB.batch([...statements, ...letters])
  const changed = (statement: number) => (written[statement]?.meta.changes ?? 0) > 0
  await sendAll(
    env.DISPATCH,
    sends.flatMap((send) => send(changed)),
  )
  const outcome = { emailed: emailed.length, spared }
  log.info('notification.escalated', outcome)
  return outcome
}

/** Its recipient as its event named them: with the address and name the event carried, if it did (ArtHunt's). */
function recipientOf(row: EscalatingRow): RecipientRef {
  if (row.recipient_email === null) return { userId: row.recipient_user_id }
  // A name the event did not carry is looked up in the contact replica, as planning did.
  return {
    userId: row.recipient_user_id,
    inline: { email: row.recipient_email, displayName: row.recipient_name as string },
  }
}
