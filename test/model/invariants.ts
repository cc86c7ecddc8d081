import { env } from 'cloudflare:workers'
import type { ItemMarks } from '../../src/inbox/feed.ts'
import { FINAL_STATUSES } from '../../src/notifications/status.ts'
import { allRows, shardDbs } from '../shards.ts'
import type { OperatorCancel, World } from './world.ts'

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
    ...oneEmail(world),
    ...(await oneEmailPerDecision(world)),
    ...(await erasedIsGone(world)),
    ...(await throttleHolds(world)),
    ...(await oneOutcomePerEscalation(world)),
    ...(await nothingSentAfterCancel(world)),
  ]
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
  for (const [id, decision] of decisionOf) {
    const entry = counts.get(decision)
    if (entry) entry.replays += world.replays.get(id) ?? 0
  }
  return [...counts]
    .filter(([, entry]) => entry.emails > 1 + entry.replays)
    .map(([decision, entry]) => `one email per decision: decision ${decision} was emailed ${entry.emails} times`)
}

/**
 * One email: per notification, at most one email the provider accepted — a
 * replay inside the provider's idempotency window is the same email, and is
 * not in its record. An operator's replay is a decision to send again: each
 * allows one more.
 */
function oneEmail(world: World): string[] {
  const counts = new Map<string, number>()
  for (const email of world.emails()) counts.set(email.notificationId, (counts.get(email.notificationId) ?? 0) + 1)
  const violations: string[] = []
  for (const [id, count] of counts) {
    const allowed = 1 + (world.replays.get(id) ?? 0)
    if (count > allowed)
      violations.push(`one email: notification ${id} was accepted ${count} times (allowed ${allowed})`)
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
 * Nothing sent after its cancel committed: no notification ended `cancelled`
 * was emailed; an email the provider accepted after its notification's key
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
  for (const row of rows) {
    const at = emailed.get(row.id)
    if (row.status === 'cancelled' && at !== undefined) {
      violations.push(
        `nothing sent after its cancel: notification ${row.id} (${row.kind}, key ${row.cancellation_key}) is cancelled (${row.status_reason}), yet the provider accepted its email at ${iso(at)}`,
      )
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
