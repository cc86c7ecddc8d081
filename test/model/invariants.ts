import { env } from 'cloudflare:workers'
import { FINAL_STATUSES } from '../../src/notifications/status.ts'
import { allRows, shardDbs } from '../shards.ts'
import type { World } from './world.ts'

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
  return violations
}
