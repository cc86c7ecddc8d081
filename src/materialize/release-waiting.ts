import type { Config } from '../config.ts'
import { otherPrimaryOf } from '../d1/shards.ts'
import { notificationDeadLetter } from '../dead-letters/notification.ts'
import { pseudonymOf } from '../erasure/pseudonym.ts'
import type { PipelineError } from '../errors.ts'
import type { Urgency } from '../events/define.ts'
import { deliveryOf } from '../events/registry.ts'
import type { Logger } from '../log.ts'
import {
  type AwaitingRow,
  failAwaiting,
  type Release,
  releaseAwaiting,
  selectReleasable,
  takeAwaiting,
} from '../notifications/contact-wait.ts'
import type { NotificationRow } from '../notifications/row.ts'
import { dispatchFor } from '../queue/dispatch-message.ts'
import { sendAll } from '../queue/send.ts'
import { renderNotification } from '../templates/render-notification.ts'
import { loadContext } from './context.ts'
import { type NotificationSource, notificationFor } from './plan-event.ts'
import { type SendsAfter, writeAgain } from './write-again.ts'

/** Waiting notifications released per call; the cron takes the rest a minute later. */
const RELEASE_BATCH = 200

/**
 * Releases the notifications that waited for a contact which exists now —
 * those of `userIds` (a contact batch just written), or any (the cron's
 * sweep, which also catches contacts put by an operator): each is rendered
 * for its contact exactly as planning would have, written `pending` at its
 * send time, and put on the dispatch queue — or, of a kind that gathers into
 * digests or is throttled, written anew as planning writes it (its digest,
 * the throttle's window). A notification whose template
 * cannot be rendered ends `failed` with that code and its dead letter. If the queue refuses, the
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
  const context = await contextOfRows(env, rows)
  const nowIso = now.toISOString()
  const statements: D1PreparedStatement[] = []
  const letters: D1PreparedStatement[] = []
  // What each release sends on, once its statements' changes are known.
  const sends: SendsAfter[] = []
  for (const row of rows) {
    if (gathers(row)) {
      // A kind that gathers into digests or is throttled: written anew as planning writes it.
      const made = await notificationFor(
        { source: row.source, event: { eventId: row.event_id, idempotencyKey: row.idempotency_key } },
        intentOf(row),
        { userId: row.recipient_user_id },
        row.channel,
        context,
        config,
        now,
      )
      if (!('error' in made)) {
        sends.push(writeAgain(env.DB, takeAwaiting(env.DB, row.id), withEscalation(made, row), statements, now))
        continue
      }
      statements.push(failed(row, made.error))
      letters.push(await deadLetterOf(row, made.error))
      sends.push(() => [])
      continue
    }
    const made = await releaseOf(row, context, config, now)
    if ('error' in made) {
      statements.push(failed(row, made.error))
      letters.push(await deadLetterOf(row, made.error))
      sends.push(() => [])
    } else {
      const first = statements.length
      statements.push(releaseAwaiting(env.DB, made, nowIso))
      sends.push((changed) => (changed(first) ? [dispatchFor(row.id, made.scheduledAt, now)] : []))
    }
  }
  // The dead letters after the marks, each written only if its mark applied.
  const written = await env.DB.batch([...statements, ...letters])
  // Only what this call released goes on the queue: a concurrent release of the same row wrote nothing here.
  const changed = (statement: number) => (written[statement]?.meta.changes ?? 0) > 0
  const released = sends.flatMap((send) => send(changed))
  await sendAll(env.DISPATCH, released)
  if (released.length > 0) log.info('notification.released', { count: released.length })
  return released.length

  function failed(row: AwaitingRow, error: PipelineError): D1PreparedStatement {
    log.warn('notification.release-failed', { notificationId: row.id, kind: row.kind, code: error.code })
    return failAwaiting(env.DB, row.id, error.code, error.message, nowIso)
  }

  function deadLetterOf(row: AwaitingRow, error: PipelineError): Promise<D1PreparedStatement> {
    return notificationDeadLetter(env.DB, row, {
      status: 'failed',
      code: error.code,
      error: error.message,
      attempts: 1,
      at: nowIso,
    })
  }
}

/**
 * Whether a waiting notification's kind gathers into digests or is throttled
 * on its channel: then its release is decided as planning decides — the
 * recipient's digest, the throttle's window, an opt-out since — not sent on
 * its own because its contact came late.
 */
function gathers(row: AwaitingRow): boolean {
  const policy = deliveryOf(row.kind, row.channel)
  return policy.digest !== undefined || policy.throttle !== undefined
}

/**
 * What planning reads (contacts, preferences, policies, templates) for
 * notifications that waited and are planned again now: their recipients and
 * kinds, in the shard of `env`.
 */
export function contextOfRows(env: Env, rows: readonly Pick<AwaitingRow, 'recipient_user_id' | 'kind'>[]) {
  return loadContext(
    env.DB,
    {
      events: [],
      userIds: [...new Set(rows.map((row) => row.recipient_user_id))],
      needPool: false,
      kinds: [...new Set(rows.map((row) => row.kind))],
      decisionPersons: [],
    },
    otherPrimaryOf(env),
  )
}

/** A waiting email that escalated before it waited for its contact keeps its escalation, for its story. */
function withEscalation(made: NotificationRow, row: AwaitingRow): NotificationRow {
  if (row.escalation_of === null || row.escalation_unless === null) return made
  return {
    ...made,
    escalation: { of: row.escalation_of, unless: row.escalation_unless, decidedAt: row.escalated_at ?? undefined },
  }
}

/** The parts of its event's intent a waiting notification kept. */
export function intentOf(row: AwaitingRow): NotificationSource['intent'] {
  return {
    kind: row.kind,
    urgency: row.urgency as Urgency,
    model: JSON.parse(row.model ?? '{}') as Record<string, unknown>,
    traceId: row.trace_id ?? undefined,
    cancellationKey: row.cancellation_key ?? undefined,
    decision:
      row.decision_person === null
        ? undefined
        : {
            person: row.decision_person,
            request: row.decision_request,
            // Null in a row written before decision times were kept: written back as it was.
            at: row.decision_at as string,
            fallback: row.is_fallback === 1,
          },
  }
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
