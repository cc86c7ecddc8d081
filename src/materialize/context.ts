import type { DeliveryMode } from '../events/define.ts'
import type { DecisionRef } from '../notifications/decision.ts'
import { optOutKey } from '../preferences/preference-store.ts'
import { STATUS_AS_FILTER } from '../sql.ts'
import type { TemplateSource } from '../templates/sandbox.ts'
import { activeTemplatesOf, templatesOf } from '../templates/template-store.ts'
import { type Contact, type ContactRow, contactFromRow } from './contacts.ts'
import { LEGACY_MARKS } from './processed.ts'

/** Everything the planner needs from D1 for one batch, read in one round trip. */
export type BatchContext = {
  processed: Set<string>
  /** Pending notifications of already-processed events, to dispatch again. */
  pendingByEvent: Map<string, { id: string; scheduledAt: string }[]>
  contacts: Map<string, Contact>
  reviewerPool: string[]
  /** `${kind}|${urgency}` → enabled channels, for the (kind, urgency) pairs that have a stored policy. */
  channels: Map<string, string[]>
  /** Active templates of the batch's kinds: the stored ones first, then each kind's defaults. */
  templates: TemplateSource[]
  /** Decisions already notified from the authoritative source. */
  authoritative: DecisionRef[]
  /** (user, kind, channel) opted out of, as `optOutKey` spells them. */
  optedOut: Set<string>
  /** How a recipient chose to receive a kind on a channel (instant or digest), by `optOutKey`; absent: the kind's default. */
  modes: Map<string, DeliveryMode>
  /** The batch's cancellation keys that were cancelled already: an event of one creates nothing. */
  cancelled: Set<string>
}

/** What to read for a batch. */
export type ContextQuery = {
  /**
   * The events, each by its id and idempotency key: a processed mark is found
   * by both (its primary key), a notification by its event, the index its
   * uniqueness keeps.
   */
  events: { eventId: string; idempotencyKey: string }[]
  userIds: string[]
  needPool: boolean
  kinds: string[]
  decisionPersons: string[]
  /** The cancellation keys its events carry. */
  cancellationKeys?: string[]
}

const json = (values: readonly string[]) => JSON.stringify([...new Set(values)])

/**
 * Reads the batch context with one `DB.batch` of nine statements, whatever
 * the batch size: lists travel as one JSON parameter each (`json_each`). In a
 * D1 shard other than the primary (`primary` given), what only operators
 * write — the reviewer pool, channel policies, templates — is read from the
 * primary first, and the pool's members are then looked up in the shard by id.
 */
export async function loadContext(shard: D1Database, query: ContextQuery, primary?: D1Database): Promise<BatchContext> {
  if (primary === undefined) {
    const recipients = recipientStatements(shard, query, true)
    const [processed, pending, contacts, pool, policies, templates, cancelled, decisions, choices] = await shard.batch([
      ...recipients.slice(0, 3),
      ...operatorStatements(shard, query),
      ...recipients.slice(3),
    ])
    return contextOf(
      [processed, pending, contacts, pool, policies, templates, decisions, choices, cancelled] as D1Result[],
      query.kinds,
    )
  }
  const [pool, policies, templates, cancelled] = await primary.batch(operatorStatements(primary, query))
  const members = rows<{ user_id: string }>(pool as D1Result).map((row) => row.user_id)
  const [processed, pending, contacts, decisions, choices] = await shard.batch(
    recipientStatements(shard, { ...query, userIds: [...query.userIds, ...members] }, false),
  )
  return contextOf(
    [processed, pending, contacts, pool, policies, templates, decisions, choices, cancelled] as D1Result[],
    query.kinds,
  )
}

/**
 * The reads of what only operators (and cancellations) write, in `contextOf`'s order: the reviewer pool,
 * channel policies, templates, the batch's keys already cancelled.
 */
function operatorStatements(db: D1Database, query: ContextQuery): D1PreparedStatement[] {
  return [
    // ?1: 1 when the pool is needed
    db.prepare('SELECT user_id FROM reviewer_pool WHERE ?1 = 1 ORDER BY user_id').bind(query.needPool ? 1 : 0),
    // All of them, disabled ones too: a pair with every channel disabled is silent, not defaulted.
    db.prepare('SELECT kind, urgency, channel, enabled FROM channel_policies'),
    // ?1: JSON array of kinds
    activeTemplatesOf(db, [...new Set(query.kinds)]),
    // ?1: JSON array of cancellation keys
    db
      .prepare('SELECT key FROM cancellations WHERE key IN (SELECT value FROM json_each(?1))')
      .bind(json(query.cancellationKeys ?? [])),
  ]
}

/**
 * The reads of the recipients' rows, in `contextOf`'s order: processed marks, pending notifications,
 * contacts, then decisions and preferences. `joinPool`: add the reviewer pool's members by a join (the pool
 * is in the same database); otherwise they are among `userIds`.
 */
function recipientStatements(db: D1Database, query: ContextQuery, joinPool: boolean): D1PreparedStatement[] {
  const keys = query.events.map((event) => event.idempotencyKey)
  const eventIds = query.events.map((event) => event.eventId)
  const pool = joinPool && query.needPool ? 1 : 0
  return [
    // ?1: JSON array of [event id, idempotency key]; ?2: JSON array of the keys, for the marks written
    // before they were keyed by event
    db
      .prepare(
        `SELECT idempotency_key FROM processed_marks
         WHERE (event_id, idempotency_key) IN
               (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1))
         UNION ALL
         SELECT idempotency_key FROM ${LEGACY_MARKS} WHERE idempotency_key IN (SELECT value FROM json_each(?2))`,
      )
      .bind(JSON.stringify(query.events.map((event) => [event.eventId, event.idempotencyKey])), json(keys)),
    // ?1: JSON array of idempotency keys; ?2: JSON array of their event ids. Looked up by event id,
    // on the index of the notifications' unique key: an index of the idempotency key would be one more
    // row written for every notification, for this statement alone.
    db
      .prepare(
        `SELECT id, idempotency_key, scheduled_at FROM notifications
         WHERE event_id IN (SELECT value FROM json_each(?2))
           AND idempotency_key IN (SELECT value FROM json_each(?1)) AND ${STATUS_AS_FILTER} IN ('pending', 'escalating')`,
      )
      .bind(json(keys), json(eventIds)),
    // ?1: JSON array of user ids; ?2: 1 to add every reviewer of the pool
    db
      .prepare(
        `SELECT user_id, email, locale, time_zone, display_name, version FROM contacts
         WHERE user_id IN (SELECT value FROM json_each(?1))
            OR (?2 = 1 AND user_id IN (SELECT user_id FROM reviewer_pool))`,
      )
      .bind(json(query.userIds), pool),
    // ?1: JSON array of "{PersonId}:{decision}"
    db
      .prepare(
        `SELECT decision_person, decision_request, decision_at FROM notifications
         WHERE is_fallback = 0 AND decision_person IN (SELECT value FROM json_each(?1))`,
      )
      .bind(json(query.decisionPersons)),
    // ?1: JSON array of user ids; ?2: 1 to add every reviewer of the pool; ?3: JSON array of kinds
    db
      .prepare(
        `SELECT user_id, kind, channel, enabled, mode FROM preferences
         WHERE (enabled = 0 OR mode IS NOT NULL) AND kind IN (SELECT value FROM json_each(?3))
           AND (user_id IN (SELECT value FROM json_each(?1))
                OR (?2 = 1 AND user_id IN (SELECT user_id FROM reviewer_pool)))`,
      )
      .bind(json(query.userIds), pool, json(query.kinds)),
  ]
}

function contextOf(results: D1Result[], kinds: string[]): BatchContext {
  const [processed, pending, contacts, pool, policies, templates, decisions, choices, cancelled] = results
  const chosen = rows<{ user_id: string; kind: string; channel: string; enabled: number; mode: DeliveryMode | null }>(
    choices,
  )
  return {
    processed: new Set(rows<{ idempotency_key: string }>(processed).map((row) => row.idempotency_key)),
    pendingByEvent: pendingOf(rows(pending)),
    contacts: new Map(rows<ContactRow>(contacts).map((row) => [row.user_id, contactFromRow(row)])),
    reviewerPool: rows<{ user_id: string }>(pool).map((row) => row.user_id),
    channels: channelsOf(rows(policies)),
    templates: templatesOf(templates, kinds),
    authoritative: rows<{ decision_person: string; decision_request: string | null; decision_at: string | null }>(
      decisions,
    ).map((row) => ({ person: row.decision_person, request: row.decision_request, at: row.decision_at })),
    optedOut: new Set(
      chosen.filter((row) => row.enabled === 0).map((row) => optOutKey(row.user_id, row.kind, row.channel)),
    ),
    modes: new Map(
      chosen.flatMap((row) => (row.mode ? [[optOutKey(row.user_id, row.kind, row.channel), row.mode]] : [])),
    ),
    cancelled: new Set(rows<{ key: string }>(cancelled).map((row) => row.key)),
  }
}

function pendingOf(list: { id: string; idempotency_key: string; scheduled_at: string }[]) {
  const pendingByEvent = new Map<string, { id: string; scheduledAt: string }[]>()
  for (const row of list) {
    pendingByEvent.set(row.idempotency_key, [
      ...(pendingByEvent.get(row.idempotency_key) ?? []),
      { id: row.id, scheduledAt: row.scheduled_at },
    ])
  }
  return pendingByEvent
}

function channelsOf(list: { kind: string; urgency: string; channel: string; enabled: number }[]) {
  const channels = new Map<string, string[]>()
  for (const row of list) {
    const key = `${row.kind}|${row.urgency}`
    channels.set(key, [...(channels.get(key) ?? []), ...(row.enabled ? [row.channel] : [])])
  }
  return channels
}

function rows<T>(result: D1Result | undefined): T[] {
  return (result?.results ?? []) as T[]
}
