import { env } from 'cloudflare:workers'
import type { ItemMarks } from '../../src/inbox/feed.ts'
import { FINAL_STATUSES } from '../../src/notifications/status.ts'
import { allRows, shardDbs } from '../shards.ts'
import { emailKey, type ModelEmail, type OperatorCancel, type Resolution, reportedEmails, type World } from './world.ts'

/**
 * The lifecycle's invariants, read off the real D1 (every shard of it) and
 * the provider's own record of what it accepted. `during` holds after every command of a run;
 * `settled` once its faults are healed and the clock has run on (`drain`).
 */

/** The throttle of ResponseCreated: at most 5 emails an hour to one recipient who takes them one by one. */
export const THROTTLE = { kind: 'ResponseCreated', max: 5, windowMs: 3_600_000 }

/** Keeps track of the notifications a run has seen, and of those told in a digest. */
export async function observe(world: World): Promise<void> {
  const rows = await allRows<{ id: string; status: string; digest_id: string | null }>(
    'SELECT id, status, digest_id FROM notifications',
  )
  for (const row of rows) {
    world.seen.add(row.id)
    if (row.status === 'digested' || row.digest_id !== null) world.digested.add(row.id)
  }
}

/** What must hold after every command. Returns the violations found. */
export async function during(world: World): Promise<string[]> {
  await observe(world)
  return [
    ...(await oneEmail(world)),
    ...noFailoverWhileAwaited(world),
    ...(await sentThroughItsTransport(world)),
    ...(await eventsOfTheirOwnProvider(world)),
    ...(await oneEmailPerDecision(world)),
    ...(await erasedIsGone(world)),
    ...(await throttleHolds(world)),
    ...(await oneOutcomePerEscalation(world)),
    ...(await nothingSentAfterCancel(world)),
    ...cancelAnswersHold(world),
  ]
}

/**
 * What a cancellation answered holds: a notification it reported `cancelled`
 * had not gone out and never will — no provider accepted an email of it,
 * before the answer or after — but for the tries the answer named, taken as
 * not sent with no report from their transport (`unconfirmedThrough`): an
 * email accepted before the answer through one of those transports.
 */
function cancelAnswersHold(world: World): string[] {
  const violations: string[] = []
  const emails = world.emails()
  for (const cancel of world.cancels) {
    for (const entry of cancel.answered) {
      if (entry.outcome !== 'cancelled') continue
      const wrong = emails.filter(
        (email, index) =>
          email.notificationId === entry.id &&
          !(index < cancel.emailsBefore && entry.unconfirmedThrough.includes(email.transport)),
      )
      if (wrong.length > 0) {
        violations.push(
          `what a cancellation answered holds: notification ${entry.id} was reported cancelled (unconfirmedThrough [${entry.unconfirmedThrough.join(', ')}]) by the cancellation of ${cancel.key} asked at ${cancel.askedAt}, yet ${wrong.map((email) => `${email.transport} accepted its email at ${iso(email.at)}`).join(', ')}`,
        )
      }
    }
  }
  return violations
}

/**
 * One email per verification decision: a decision may arrive from both of
 * its sources, each its own notification; the owner gets one email for it
 * (the model's decisions all name their request).
 */
async function oneEmailPerDecision(world: World): Promise<string[]> {
  const emails = world.emails()
  if (emails.length === 0) return []
  const results = await allRows<{ id: string; decision: string }>(
    `SELECT id, decision_person || '/' || coalesce(decision_request, '') AS decision FROM notifications
     WHERE decision_person IS NOT NULL AND id IN (SELECT value FROM json_each(?1))`,
    JSON.stringify([...new Set(emails.map((email) => email.notificationId))]),
  )
  const decisionOf = new Map(results.map((row) => [row.id, row.decision]))
  const counts = new Map<string, { emails: number; replays: number }>()
  for (const email of emails) {
    const decision = decisionOf.get(email.notificationId)
    if (!decision) continue
    const entry = counts.get(decision) ?? { emails: 0, replays: 0 }
    entry.emails += 1
    counts.set(decision, entry)
  }
  const byId = emailsByNotification(world)
  for (const [id, decision] of decisionOf) {
    const entry = counts.get(decision)
    // An operator's replay allows one more; so does an email sent again as documented (`oneEmail`).
    if (entry) entry.replays += (world.replays.get(id) ?? 0) + exceptions(world, byId.get(id) ?? []).length
  }
  return [...counts]
    .filter(([, entry]) => entry.emails > 1 + entry.replays)
    .map(([decision, entry]) => `one email per decision: decision ${decision} was emailed ${entry.emails} times`)
}

/** The emails the providers accepted, by notification, each list in the order they were accepted. */
function emailsByNotification(world: World): Map<string, ModelEmail[]> {
  return Map.groupBy(world.emails(), (email) => email.notificationId)
}

/**
 * One email: per notification, at most one email the providers accepted —
 * both of them counted together — a replay inside the provider's idempotency
 * window is the same email, and is not in its record. An operator's replay is
 * a decision to send again: each allows one more.
 *
 * The documented exceptions (docs/operating.md, "Provider failover"; the
 * binding has no idempotency key): an email a provider took whose delivery
 * events never reached the Worker within the wait for them is taken as not
 * sent, and goes again — through the next transport, when it waited to leave
 * one that could not be used, or through the binding again. Allowed only
 * precisely so: the model lost or held back the events of the email before
 * (`eventFates`); the Worker was seen waiting for that transport's events
 * (`waits`) — to leave it while it was paused or its circuit open
 * (`failover_from` naming it), or, through the binding, to send it again
 * through the binding — for the whole of UNKNOWN_OUTCOME_SECONDS, and the
 * cron ended that wait (`resolutions`, its reason naming the same
 * transport); and the next email came after that end with no event about
 * the one before stored by then — neither by the end of the wait nor after
 * it, before the next went (an event late by a moment still stops the
 * second send). Through Resend a wait that ends with no event is a dead
 * letter, never a blind send.
 */
async function oneEmail(world: World): Promise<string[]> {
  const violations: string[] = []
  for (const [id, emails] of emailsByNotification(world)) {
    const allowed = 1 + (world.replays.get(id) ?? 0)
    if (emails.length <= allowed) continue
    const reasons: string[] = []
    for (let k = 1; k < emails.length; k += 1) {
      const reason = notExcepted(world, emails[k - 1] as ModelEmail, emails[k] as ModelEmail)
      if (reason !== undefined) reasons.push(reason)
    }
    const excepted = emails.length - 1 - reasons.length
    if (emails.length - excepted > allowed) {
      const list = emails.map((email) => `${email.transport} at ${iso(email.at)}`).join(', ')
      violations.push(
        `one email: notification ${id} was accepted ${emails.length} times (${list}; allowed ${allowed}${excepted > 0 ? `, and ${excepted} after a wait for events that never came` : ''}): ${reasons.join('; ')}`,
      )
    }
  }
  return violations
}

/** The emails of one notification sent again as documented (see `oneEmail`): each after the one before it. */
function exceptions(world: World, emails: readonly ModelEmail[]): ModelEmail[] {
  return emails.filter((email, k) => k > 0 && notExcepted(world, emails[k - 1] as ModelEmail, email) === undefined)
}

/** How long an unknown outcome waits for delivery events: UNKNOWN_OUTCOME_SECONDS (its default, unless the run sets it). */
function waitMs(world: World): number {
  return Number((world.env as unknown as Record<string, string | undefined>).UNKNOWN_OUTCOME_SECONDS ?? 600) * 1000
}

/** Whether a wait seen lasted the whole of UNKNOWN_OUTCOME_SECONDS from the claim that began it. */
function wholeWait(world: World, wait: { until: string; seenAt: number }): boolean {
  return Date.parse(wait.until) - wait.seenAt >= waitMs(world)
}

/** How a wait's end reads: whose events it awaited, and what it freed the notification for. */
function ending(end: Resolution): string {
  return `${end.from}'s at ${iso(end.at)}, ${end.failover === null ? 'to send it again' : `freed as leaving ${end.failover}`}`
}

/**
 * Why `next` is not the documented exception after `previous` (see
 * `oneEmail`), or undefined when it is.
 */
function notExcepted(world: World, previous: ModelEmail, next: ModelEmail): string | undefined {
  const { notificationId: id } = previous
  const fate = world.eventFates.get(emailKey(previous))
  const what = `the ${next.transport} email at ${iso(next.at)} after the ${previous.transport} one at ${iso(previous.at)}`
  if (fate === undefined) return `${what}, whose delivery events the model let reach the Worker in time`
  const between = world.resolutions.filter((end) => end.id === id && end.at >= previous.at && end.at <= next.at)
  // A failover's end names the transport whose events it awaited; a wait to send again is the binding's alone.
  const ended = between.filter(
    (end) =>
      end.from === previous.transport &&
      (end.failover === null ? end.from === 'cloudflare' && next.transport === end.from : end.failover === end.from),
  )
  if (ended.length === 0) {
    const others = between.length > 0 ? ` (the waits that ended: ${between.map(ending).join('; ')})` : ''
    return `${what}, with no wait for ${previous.transport}'s events ended in between${others}`
  }
  // Stored by the time the next went (read as the provider accepted it): an event about the one before — the
  // binding sends again under the same Message-ID, so an event of the next is no event of the one before yet.
  const index = world.emails().indexOf(next)
  const acceptance = world.accepted.find((accepted) => accepted.index === index)
  if (acceptance === undefined || acceptance.reported.includes(emailKey(previous))) {
    return `${what}: a ${previous.transport} event about the one before had been stored when the next went`
  }
  const waited = ended.some((end) =>
    world.waits.some(
      (wait) =>
        wait.id === id &&
        wait.from === end.from &&
        wait.seenAt >= previous.at &&
        wait.until <= iso(end.at) &&
        wholeWait(world, wait) &&
        (end.failover === null ? wait.failover === null : wait.failover === end.from && wait.paused),
    ),
  )
  if (waited) return undefined
  return `${what}: its events were ${fate}, but no wait for them (while ${previous.transport} could not be used, for a failover) was seen before the end: ${ended.map(ending).join('; ')}`
}

/**
 * No failover while the first transport's events are awaited: a request to
 * one transport carrying a notification that an earlier request to the other
 * may have delivered (no answer, a 5xx, an internal error, or accepted) comes
 * only after the cron ended the notification's wait for the other's events
 * with none (a failover's resolution, `resolutions`, of a wait seen while the
 * other could not be used and lasting UNKNOWN_OUTCOME_SECONDS), or after an
 * operator's replay. A refusal that says nothing was sent frees nothing: a later
 * request's answer never undoes an earlier one that may have gone out.
 */
function noFailoverWhileAwaited(world: World): string[] {
  const violations: string[] = []
  const earlier = new Map<string, { transport: string; at: number; answer: string }[]>()
  for (const request of world.requests) {
    for (const id of request.ids) {
      const before = earlier.get(id) ?? []
      for (const other of new Set(before.map((tried) => tried.transport))) {
        if (other === request.transport) continue
        const mayHave = before.filter((tried) => tried.transport === other && tried.answer !== 'refused').at(-1)
        if (!mayHave) continue
        const freed = world.resolutions.some(
          (end) =>
            end.id === id &&
            end.failover === other &&
            end.from === other &&
            end.at >= mayHave.at &&
            end.at <= request.at &&
            world.waits.some(
              (wait) =>
                wait.id === id &&
                wait.failover === other &&
                wait.paused &&
                wait.seenAt >= mayHave.at &&
                wait.until <= iso(end.at) &&
                wholeWait(world, wait),
            ),
        )
        const replayed = (world.replayedAt.get(id) ?? []).some((at) => at >= mayHave.at && at <= request.at)
        if (!freed && !replayed) {
          violations.push(
            `no failover while its events are awaited: notification ${id} was sent to ${request.transport} at ${iso(request.at)} though ${other} may have taken it at ${iso(mayHave.at)} (${mayHave.answer}) and no wait for ${other}'s events ended in between`,
          )
        }
      }
      before.push({ transport: request.transport, at: request.at, answer: request.answer })
      earlier.set(id, before)
    }
  }
  return violations
}

/**
 * The row names the provider that accepted it: an email ended `sent` was
 * accepted by a provider — one email, or the exception's two — and its
 * `transport` is the provider of the last.
 */
async function sentThroughItsTransport(world: World): Promise<string[]> {
  const rows = await allRows<{ id: string; transport: string | null; status_reason: string | null }>(
    "SELECT id, transport, status_reason FROM notifications WHERE status = 'sent' AND channel = 'email'",
  )
  const byId = emailsByNotification(world)
  const violations: string[] = []
  for (const row of rows) {
    const last = byId.get(row.id)?.at(-1)
    if (!last) {
      violations.push(
        `sent through its transport: notification ${row.id} is sent through ${row.transport} (${row.status_reason}), yet no provider accepted an email for it`,
      )
    } else if (row.transport !== last.transport) {
      violations.push(
        `sent through its transport: notification ${row.id} is sent through ${row.transport} (${row.status_reason}), yet ${last.transport} accepted its email at ${iso(last.at)}${row.transport && !byId.get(row.id)?.some((email) => email.transport === row.transport) ? `, and ${row.transport} none` : ''}`,
      )
    }
  }
  return violations
}

/**
 * A provider's delivery events are about its own emails: an event stored as
 * about a notification names an email its provider accepted for that
 * notification; and once a notification is sent through one transport, no
 * event of the other that came after is taken as about it — it settles
 * nothing of what the other sent (docs: "changes nothing on the notification").
 */
async function eventsOfTheirOwnProvider(world: World): Promise<string[]> {
  const events = await allRows<{
    provider: string
    provider_message_id: string
    notification_id: string
    received_at: string
    type: string
  }>(
    'SELECT provider, provider_message_id, notification_id, received_at, type FROM delivery_events WHERE notification_id IS NOT NULL',
  )
  if (events.length === 0) return []
  const rows = await allRows<{ id: string; status: string; transport: string | null }>(
    `SELECT id, status, transport FROM notifications WHERE id IN (SELECT value FROM json_each(?1))`,
    JSON.stringify([...new Set(events.map((event) => event.notification_id))]),
  )
  const rowOf = new Map(rows.map((row) => [row.id, row]))
  const byKey = new Map(world.emails().map((email) => [emailKey(email), email]))
  const byId = emailsByNotification(world)
  const violations: string[] = []
  for (const event of events) {
    const email = byKey.get(emailKey({ transport: event.provider, providerId: event.provider_message_id }))
    if (email && email.notificationId !== event.notification_id) {
      violations.push(
        `events of their own provider: a ${event.provider} event (${event.type}) about the email of ${email.notificationId} was taken as about ${event.notification_id}`,
      )
    }
    const row = rowOf.get(event.notification_id)
    if (row?.status !== 'sent' || row.transport === null || row.transport === event.provider) continue
    const sentThrough = byId.get(row.id)?.filter((accepted) => accepted.transport === row.transport)
    const last = sentThrough?.at(-1)
    if (last && event.received_at >= iso(last.at)) {
      violations.push(
        `events of their own provider: notification ${row.id} was sent through ${row.transport} at ${iso(last.at)}, yet a ${event.provider} event (${event.type}) that came at ${event.received_at} was taken as about it`,
      )
    }
  }
  return violations
}

/** Every table of the schema with its text columns. */
async function textColumns(): Promise<{ table: string; columns: string[] }[]> {
  const { results: tables } = await env.DB.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> 'd1_migrations'",
  ).all<{ name: string }>()
  const out: { table: string; columns: string[] }[] = []
  for (const { name } of tables) {
    const { results: columns } = await env.DB.prepare(`SELECT name, type FROM pragma_table_info('${name}')`).all<{
      name: string
      type: string
    }>()
    const text = columns.filter((column) => /TEXT|^$/i.test(column.type)).map((column) => column.name)
    if (text.length > 0) out.push({ table: name, columns: text })
  }
  return out
}

let schema: Promise<{ table: string; columns: string[] }[]> | undefined

/**
 * Erased means gone: no table of any shard holds an erased person's address
 * (in any letter case) or name, and no email reached the address after the
 * erasure. A suppression survives only under the address's pseudonym.
 */
async function erasedIsGone(world: World): Promise<string[]> {
  const erased = world.people.filter((person) => person.erasedAt !== undefined)
  if (erased.length === 0) return []
  schema ??= textColumns()
  const violations: string[] = []
  for (const person of erased) {
    const addresses = [person.email, ...(person.formerEmails ?? [])].map((address) => address.toLowerCase())
    const probes = (await schema).flatMap(({ table, columns }) =>
      columns.flatMap((column) => addresses.map((address) => ({ table, column, address }))),
    )
    for (const [shard, db] of shardDbs().entries()) {
      const found = await db.batch<{ n: number }>(
        probes.map(({ table, column, address }) =>
          db
            .prepare(
              `SELECT count(*) AS n FROM "${table}" WHERE instr(lower("${column}"), ?1) > 0 OR instr("${column}", ?2) > 0`,
            )
            .bind(address, person.name),
        ),
      )
      found.forEach((result, index) => {
        const n = result.results[0]?.n ?? 0
        if (n > 0)
          violations.push(
            `erased means gone: ${n} row(s) of ${probes[index]?.table} in shard ${shard} still name person ${person.userId}`,
          )
      })
    }
    const late = world
      .emails()
      .filter((email) => addresses.includes(email.to.toLowerCase()) && email.at > (person.erasedAt as number))
    if (late.length > 0)
      violations.push(`erased means gone: ${late.length} email(s) reached person ${person.userId} after the erasure`)
  }
  return violations
}

/**
 * The throttle: at most THROTTLE.max emails of the throttled kind, sent one
 * by one (not through a digest), to one recipient in any sliding hour.
 */
async function throttleHolds(world: World): Promise<string[]> {
  const emails = world.emails()
  if (emails.length === 0) return []
  const ids = [...new Set(emails.map((email) => email.notificationId))]
  const results = await allRows<{ id: string; kind: string; is_digest: number }>(
    'SELECT id, kind, is_digest FROM notifications WHERE id IN (SELECT value FROM json_each(?1))',
    JSON.stringify(ids),
  )
  const instant = new Set(
    results
      .filter((row) => row.kind === THROTTLE.kind && row.is_digest === 0 && !world.digested.has(row.id))
      .map((row) => row.id),
  )
  const byRecipient = new Map<string, number[]>()
  for (const email of emails) {
    if (!instant.has(email.notificationId)) continue
    const to = email.to.toLowerCase()
    byRecipient.set(to, [...(byRecipient.get(to) ?? []), email.at])
  }
  const violations: string[] = []
  for (const [, times] of byRecipient) {
    times.sort((a, b) => a - b)
    for (let i = THROTTLE.max; i < times.length; i += 1) {
      if ((times[i] as number) - (times[i - THROTTLE.max] as number) < THROTTLE.windowMs) {
        violations.push(`throttle: ${THROTTLE.max + 1} emails of ${THROTTLE.kind} to one recipient within an hour`)
        break
      }
    }
  }
  return violations
}

/** When a model time was, as the Worker writes times. */
function iso(at: number): string {
  return new Date(at).toISOString()
}

/** The first email the provider accepted for each notification, by its id. */
function firstEmails(world: World): Map<string, number> {
  const first = new Map<string, number>()
  for (const email of world.emails()) if (!first.has(email.notificationId)) first.set(email.notificationId, email.at)
  return first
}

/** Which of these items (by notification id) each user's feed holds, with their marks. */
async function feedItems(rows: { id: string; user: string }[]): Promise<Map<string, ItemMarks>> {
  const byUser = Map.groupBy(rows, (row) => row.user)
  const held = await Promise.all(
    [...byUser].map(([user, list]) => env.INBOX.getByName(user).marksOf(list.map((row) => row.id))),
  )
  return new Map(held.flat().map((item) => [item.id, item]))
}

type EscalatedRow = {
  id: string
  status: string
  recipient_user_id: string
  escalation_of: string
  escalation_unless: 'seen' | 'read'
  escalated_at: string | null
  /** When its in-app notification was written: the email's wait began then. */
  item_created_at: string | null
}

/**
 * One outcome per escalation: an email that waited for its in-app item
 * (`escalation_of`) either ends `seen-in-app` and the provider never gets it,
 * or goes — once (oneEmail counts) and only after its feed decided. The D1
 * outcome is the feed's, decided against the end of the wait (its in-app
 * notification's time and ESCALATION_AFTER_SECONDS): an email spared had its
 * item marked by then, one that went had not (read off the feed, where it
 * still holds the item; a mark after the end of the wait spares nothing,
 * however late the decision came).
 */
async function oneOutcomePerEscalation(world: World): Promise<string[]> {
  const rows = await allRows<EscalatedRow>(
    `SELECT e.id, e.status, e.recipient_user_id, e.escalation_of, e.escalation_unless, e.escalated_at,
       a.created_at AS item_created_at
     FROM notifications e LEFT JOIN notifications a ON a.id = e.escalation_of
     WHERE e.escalation_of IS NOT NULL`,
  )
  const waitMs = Number(world.env.ESCALATION_AFTER_SECONDS) * 1000
  const violations: string[] = []
  const emailed = firstEmails(world)
  for (const row of rows) {
    const at = emailed.get(row.id)
    if (row.status === 'seen-in-app' && at !== undefined) {
      violations.push(
        `one outcome per escalation: email ${row.id} ended seen-in-app (its feed decided at ${row.escalated_at} that its in-app item ${row.escalation_of} was ${row.escalation_unless} in time), yet the provider accepted it at ${iso(at)}`,
      )
    }
  }
  // Each email the provider accepted was planned again by its feed's decision, before it went.
  for (const accepted of world.accepted) {
    const row = accepted.row
    if (!row?.escalation_of) continue
    if (row.escalated_at === null || accepted.at < Date.parse(row.escalated_at)) {
      violations.push(
        `one outcome per escalation: email ${accepted.notificationId} was accepted at ${iso(accepted.at)} while ${row.status}, before its feed decided (${row.escalated_at ?? 'it never had'})`,
      )
    }
  }
  const decided = rows.filter(
    (row) => row.escalated_at !== null && row.status !== 'escalating' && row.item_created_at !== null,
  )
  const items = await feedItems(decided.map((row) => ({ id: row.escalation_of, user: row.recipient_user_id })))
  for (const row of decided) {
    const item = items.get(row.escalation_of)
    // A feed that no longer holds the item (erased, withdrawn, past retention) says nothing of it.
    if (!item) continue
    const decidedAt = row.escalated_at as string
    const deadline = iso(Date.parse(row.item_created_at as string) + waitMs)
    const markedAt = row.escalation_unless === 'read' ? item.readAt : item.seenAt
    const inTime = markedAt !== null && markedAt <= deadline
    if (row.status === 'seen-in-app' && !inTime) {
      violations.push(
        `one outcome per escalation: email ${row.id} ended seen-in-app when its feed decided at ${decidedAt}, but its in-app item ${row.escalation_of} ${markedAt === null ? `was never ${row.escalation_unless}` : `was ${row.escalation_unless} only at ${markedAt}`} (its wait ended at ${deadline})`,
      )
    }
    if (row.status !== 'seen-in-app' && inTime) {
      violations.push(
        `one outcome per escalation: email ${row.id} was planned to go (now ${row.status}) when its feed decided at ${decidedAt}, but its in-app item ${row.escalation_of} was ${row.escalation_unless} at ${markedAt}, before its wait ended at ${deadline}`,
      )
    }
  }
  return violations
}

type KeyedRow = {
  id: string
  kind: string
  channel: string
  status: string
  status_reason: string | null
  recipient_user_id: string
  created_at: string
  cancellation_key: string
  cancelled_at: string | null
  /** When the row's shard recorded its key's cancellation, if it did. */
  key_cancelled_at: string | null
}

/**
 * When a key's cancellation had committed for a notification: its shard's
 * record of it (the row's `cancelled_at` is written in the same transaction),
 * or an operator's cancellation the Worker answered 200 (which recorded it in
 * every shard) asked before — the earliest the model knows of.
 */
function committedAt(
  world: World,
  key: string | null,
  times: (string | null)[],
  after?: (cancel: OperatorCancel) => boolean,
): string | undefined {
  const asked = world.cancels
    .filter((cancel) => cancel.key === key && (after?.(cancel) ?? true))
    .map((cancel) => cancel.askedAt)
  return [...times, ...asked].filter((time): time is string => time !== null).sort()[0]
}

/**
 * Whether a cancelled notification is one the Worker took as not sent, as
 * documented, because the delivery events of every email a provider took for
 * it never came (the model lost or held them back, or, with one transport,
 * never reported it: `reported`, the `emailKey`s of the delivery events
 * stored), and its reason says so: a cancellation marked it while its
 * outcome was unknown, and the wait for events ended with none; or a try
 * through a transport it had to leave, or one an operator replayed after it
 * may have gone out, was taken as not sent with no event from that one, and
 * a cancellation ended it afterwards — every email taken for it then went
 * through a transport its reason names.
 */
function takenAsNotSent(
  world: World,
  row: { id: string; status_reason: string | null },
  reported: ReadonlySet<string>,
): boolean {
  const emails = world.emails().filter((email) => email.notificationId === row.id)
  const unreported = (email: ModelEmail) =>
    world.eventFates.has(emailKey(email)) || (!world.failover && !reported.has(emailKey(email)))
  if (!emails.every(unreported)) return false
  const reason = row.status_reason ?? ''
  if (reason.startsWith('cancelled while its outcome was unknown: no delivery event came')) return true
  const left =
    /; (?:a try|tries) through ([\w ]+?) may have gone out: no delivery event came from (?:it|them), so (?:it is|they are) taken as not sent$/
      .exec(reason)?.[1]
      ?.split(' and ')
  return left !== undefined && emails.every((email) => left.includes(email.transport))
}

/**
 * Nothing sent after its cancel committed: no notification ended `cancelled`
 * was emailed (but one taken as not sent because the delivery events of its
 * emails never came, `takenAsNotSent`); an email the provider accepted after its notification's key
 * was cancelled went by a try claimed before the cancellation (in flight), or
 * is the same email sent again because such a try may have gone out (never a
 * try begun afterwards with nothing of it gone); no notification of a key is
 * created after its cancellation (an invitation.created that comes later
 * notifies nothing); and no feed holds the item of an in-app notification
 * ended `cancelled`. The model's clock sets every cancellation a millisecond
 * apart from what came before it (see `cancel` and World.deliver), so the
 * Worker's times order them.
 */
async function nothingSentAfterCancel(world: World): Promise<string[]> {
  const violations: string[] = []
  const rows = await allRows<KeyedRow>(
    `SELECT n.id, n.kind, n.channel, n.status, n.status_reason, n.recipient_user_id, n.created_at, n.cancellation_key,
       n.cancelled_at, c.cancelled_at AS key_cancelled_at
     FROM notifications n LEFT JOIN cancellations c ON c.key = n.cancellation_key
     WHERE n.cancellation_key IS NOT NULL`,
  )
  const emailed = firstEmails(world)
  // Read once, and only when a cancelled notification was emailed: this runs after every command.
  let reported: Set<string> | undefined
  for (const row of rows) {
    const at = emailed.get(row.id)
    if (row.status === 'cancelled' && at !== undefined) {
      reported ??= await reportedEmails()
      if (!takenAsNotSent(world, row, reported)) {
        violations.push(
          `nothing sent after its cancel: notification ${row.id} (${row.kind}, key ${row.cancellation_key}) is cancelled (${row.status_reason}), yet the provider accepted its email at ${iso(at)}`,
        )
      }
    }
    const committed = committedAt(world, row.cancellation_key, [row.key_cancelled_at])
    // Within one model millisecond the times cannot order a write and a cancellation: an event of the key
    // delivered in the same batch as its withdrawal, in another shard's part of it, is written just before the
    // cancellation's transaction in its shard, which withdraws it. Ended cancelled, it is what a cancellation
    // promises; one of that millisecond left standing could only have been written after the key was recorded.
    if (
      committed !== undefined &&
      (row.created_at > committed || (row.created_at === committed && row.status !== 'cancelled'))
    ) {
      violations.push(
        `nothing sent after its cancel: notification ${row.id} (${row.kind} by ${row.channel}, now ${row.status}) of ${row.cancellation_key} was created at ${row.created_at}, after the key's cancellation committed at ${committed}`,
      )
    }
  }
  for (const accepted of world.accepted) {
    const row = accepted.row
    if (!row) continue
    const committed = committedAt(
      world,
      row.cancellation_key,
      [row.cancelled_at, row.key_cancelled_at],
      // An operator's cancellation counts for the emails accepted after its answer came.
      (cancel) => accepted.index >= cancel.emailsBefore,
    )
    if (committed === undefined) continue
    const claimedBefore = row.claimed_at !== null && row.claimed_at < committed
    const mayHaveGoneBefore = row.maybe_sent_at !== null && row.maybe_sent_at < committed
    if (!claimedBefore && !mayHaveGoneBefore) {
      violations.push(
        `nothing sent after its cancel: notification ${accepted.notificationId} (key ${row.cancellation_key}, ${row.status}) was accepted at ${iso(accepted.at)}, after its cancellation committed at ${committed}, by a try claimed at ${row.claimed_at ?? 'no claim'}${row.maybe_sent_at === null ? ' with nothing of it sent before' : `, sent again for one that may have gone out at ${row.maybe_sent_at}, also after`}`,
      )
    }
  }
  const withdrawn = rows.filter((row) => row.channel === 'in-app' && row.status === 'cancelled')
  const items = await feedItems(withdrawn.map((row) => ({ id: row.id, user: row.recipient_user_id })))
  for (const row of withdrawn) {
    if (items.has(row.id)) {
      violations.push(
        `nothing sent after its cancel: in-app notification ${row.id} of ${row.cancellation_key} is cancelled (${row.status_reason}), yet the feed of user ${row.recipient_user_id} still shows its item`,
      )
    }
  }
  return violations
}

/**
 * What must hold once the run's faults are healed and the clock has run on:
 * no stall (every notification final, no pause left), nothing silent (every
 * `failed` notification has its dead letter, open unless the model resolved
 * it), and the invariants of `during`.
 */
export async function settled(world: World): Promise<string[]> {
  const violations = [...world.stalls, ...(await during(world))]
  const final = FINAL_STATUSES as readonly string[]
  const rows = await allRows<{ id: string; status: string; error_code: string | null }>(
    'SELECT id, status, error_code FROM notifications',
  )
  for (const row of rows) {
    if (!final.includes(row.status)) violations.push(`no stall: notification ${row.id} is still ${row.status}`)
  }
  const pauses = await allRows('SELECT transport, code, probe_id FROM transport_pauses')
  for (const pause of pauses) violations.push(`no stall: the transport is still paused ${JSON.stringify(pause)}`)
  const letters = await allRows<{ notification: string | null; status: string; event_id: string | null }>(
    "SELECT json_extract(body, '$.notificationId') AS notification, status, event_id FROM dead_letters WHERE queue = 'notify-dispatch'",
  )
  const byNotification = new Map(letters.map((letter) => [letter.notification, letter]))
  for (const row of rows.filter((candidate) => candidate.status === 'failed')) {
    const letter = byNotification.get(row.id)
    if (!letter)
      violations.push(`nothing silent: notification ${row.id} failed (${row.error_code}) without a dead letter`)
    else if (letter.status !== 'open' && !world.discarded.has(row.id)) {
      violations.push(`nothing silent: the dead letter of failed notification ${row.id} is ${letter.status}`)
    }
  }
  for (const letter of letters) {
    if (letter.event_id === null)
      violations.push(`nothing silent: a dead letter of ${letter.notification} names no event`)
  }
  return [...violations, ...(await escalationsDecided(world)), ...(await cancelsComplete(world))]
}

/** One outcome per escalation, once settled: every email whose wait has ended was decided (the message, or the cron's search). */
async function escalationsDecided(world: World): Promise<string[]> {
  const waiting = await allRows<{ id: string; escalation_of: string; scheduled_at: string }>(
    "SELECT id, escalation_of, scheduled_at FROM notifications WHERE status = 'escalating' AND scheduled_at <= ?1",
    world.clock.iso,
  )
  return waiting.map(
    (row) =>
      `one outcome per escalation: email ${row.id} still waits for its in-app item ${row.escalation_of}, its wait ended at ${row.scheduled_at}`,
  )
}

/**
 * Nothing shown after its cancel, once settled: of a key whose cancellation
 * completed — an operator's the Worker answered 200, an invitation.withdrawn
 * processed (its mark is written after its cancellation ran) — no in-app
 * notification is left `sent`, and no feed shows its item: those shown were
 * withdrawn, those on their way were refused.
 */
async function cancelsComplete(world: World): Promise<string[]> {
  const processed = await allRows<{ event_id: string }>(
    "SELECT event_id FROM processed_marks WHERE event_type = 'invitation.withdrawn'",
  )
  const keys = new Set([
    ...world.cancels.map((cancel) => cancel.key),
    ...processed.flatMap((mark) => world.withdrawals.get(mark.event_id) ?? []),
  ])
  if (keys.size === 0) return []
  const rows = await allRows<{ id: string; status: string; recipient_user_id: string; cancellation_key: string }>(
    `SELECT id, status, recipient_user_id, cancellation_key FROM notifications
     WHERE channel = 'in-app' AND cancellation_key IN (SELECT value FROM json_each(?1))`,
    JSON.stringify([...keys]),
  )
  const items = await feedItems(rows.map((row) => ({ id: row.id, user: row.recipient_user_id })))
  return rows.flatMap((row) => [
    ...(row.status === 'sent'
      ? [
          `nothing sent after its cancel: in-app notification ${row.id} of ${row.cancellation_key} is still sent after its cancellation completed`,
        ]
      : []),
    ...(items.has(row.id)
      ? [
          `nothing sent after its cancel: the feed of user ${row.recipient_user_id} still shows the item of ${row.id} after the cancellation of ${row.cancellation_key} completed`,
        ]
      : []),
  ])
}
