import {
  eraseNotifications,
  eraseSentMessages,
  NOTIFICATIONS_TO_ERASE,
  notificationsOfPerson,
  SENT_MESSAGES_TO_ERASE,
} from './notification-statements.ts'
import { bindErasure, type ErasureParameters } from './parameters.ts'

/**
 * The statements of one erasure, each with the rows it changes written once:
 * the same condition counts them for the audit row (before anything changes)
 * and changes them. Parameters by number (./parameters.ts): ?1 user ids, ?2
 * addresses (lower-cased), ?3 [address, pseudonym] pairs, ?4 now, ?5 further
 * dead-letter ids — all JSON arrays but now.
 */

const ANY_ADDRESS_IN = (column: string) =>
  `EXISTS (SELECT 1 FROM json_each(?2) a WHERE instr(lower(${column}), a.value) > 0)`

/**
 * A dead letter that names the person: its original message, its error or its
 * history holds one of their addresses (any case), or its message holds one of
 * their user ids as a whole JSON string (in clear or inside the escaped body
 * of an inbound event), or the erasure found it by decoding a base64 body (?5).
 * One already erased is left alone.
 */
const DEAD_LETTERS_TO_ERASE = `dead_letters.body NOT LIKE '{"notifyEdgeErased":%' AND (
  ${ANY_ADDRESS_IN('dead_letters.body')} OR ${ANY_ADDRESS_IN('dead_letters.error')}
  OR ${ANY_ADDRESS_IN('dead_letters.history')}
  OR EXISTS (SELECT 1 FROM json_each(?1) u
             WHERE instr(dead_letters.body, '"' || u.value || '"') > 0
                OR instr(dead_letters.body, '"' || u.value || '\\"') > 0)
  OR dead_letters.id IN (SELECT value FROM json_each(?5)))`

/** Provider events about the person's messages, or whose detail (a bounce text) holds one of their addresses. */
const DELIVERY_EVENTS_TO_ERASE = `delivery_events.detail IS NOT NULL AND (
  delivery_events.notification_id IN (SELECT n.id FROM notifications n WHERE ${notificationsOfPerson('n')})
  OR ${ANY_ADDRESS_IN('delivery_events.detail')})`

const SUPPRESSIONS_TO_ERASE = 'suppressions.address IN (SELECT value FROM json_each(?2))'
const CONTACTS_TO_ERASE = `(contacts.user_id IN (SELECT value FROM json_each(?1))
  OR lower(contacts.email) IN (SELECT value FROM json_each(?2)))`
const PREFERENCES_TO_ERASE = 'preferences.user_id IN (SELECT value FROM json_each(?1))'
const REVIEWERS_TO_ERASE = 'reviewer_pool.user_id IN (SELECT value FROM json_each(?1))'
const AUDIT_TARGETS_TO_ERASE = 'lower(audit_log.target) IN (SELECT value FROM json_each(?2))'

/**
 * What an erasure leaves of a dead letter that names the person, as the SET
 * list of an UPDATE of `dead_letters`: the message replaced by a placeholder
 * that replay refuses, the error and the history replaced where they name the
 * person (`errorNames`, `historyNames`: SQL conditions), an open one
 * discarded (there is no one left to deliver it to). `now`: SQL of the time.
 */
export function erasedDeadLetter(now: string, errorNames: string, historyNames: string): string {
  return `body = json_object('notifyEdgeErased', 1, 'at', ${now}),
    error = CASE WHEN ${errorNames} THEN 'the error named an erased recipient' ELSE error END,
    history = CASE WHEN ${historyNames} THEN '[]' ELSE history END,
    discard_reason = CASE WHEN status = 'open' THEN 'its recipient was erased' ELSE discard_reason END,
    resolved_at = CASE WHEN status = 'open' THEN ${now} ELSE resolved_at END,
    status = CASE WHEN status = 'open' THEN 'discarded' ELSE status END`
}

/** What an erasure changes, table by table, in the order its statements run. */
export const ERASED_TABLES = [
  { name: 'sentMessages', table: 'sent_messages', where: SENT_MESSAGES_TO_ERASE },
  { name: 'deliveryEvents', table: 'delivery_events', where: DELIVERY_EVENTS_TO_ERASE },
  { name: 'notifications', table: 'notifications', where: NOTIFICATIONS_TO_ERASE },
  { name: 'deadLetters', table: 'dead_letters', where: DEAD_LETTERS_TO_ERASE },
  { name: 'suppressions', table: 'suppressions', where: SUPPRESSIONS_TO_ERASE },
  { name: 'contacts', table: 'contacts', where: CONTACTS_TO_ERASE },
  { name: 'preferences', table: 'preferences', where: PREFERENCES_TO_ERASE },
  { name: 'reviewers', table: 'reviewer_pool', where: REVIEWERS_TO_ERASE },
  { name: 'auditTargets', table: 'audit_log', where: AUDIT_TARGETS_TO_ERASE },
] as const

/**
 * Records what was erased, as pseudonyms only (`erased_addresses`): the
 * person's addresses, and their user ids (`userPseudonymOf`). What a
 * provider reports later about one of the addresses keeps none of it
 * (src/delivery/), and an event that was on its way when the erasure ran
 * writes nothing of them (src/materialize/stages/write.ts).
 * Parameters: JSON array of pseudonyms, now.
 */
export function recordErased(db: D1Database, pseudonyms: readonly string[], now: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO erased_addresses (pseudonym, erased_at) SELECT value, ?2 FROM json_each(?1) WHERE true
       ON CONFLICT (pseudonym) DO UPDATE SET erased_at = excluded.erased_at`,
    )
    .bind(JSON.stringify(pseudonyms), now)
}

/** Who erased whom, as the audit row says it: the operator, and the user id or the address's pseudonym. */
export type AuditFields = { actor: string; role: string; via: string; target: string; by: 'userId' | 'address' }

/** Rows an erasure changed, by table. */
export type ErasedCounts = Record<(typeof ERASED_TABLES)[number]['name'], number>

/**
 * The erasure's audit row, to run first in the erasure's batch: it counts, per
 * table, the rows the statements after it will change (one transaction, so
 * exactly those) and is written only when there is something to erase —
 * erasing twice leaves one row. Its target is the user id or the address's
 * pseudonym; no address is in it. It returns its parameters, whose counts are
 * the erasure's answer (a statement's own `changes` would also count what its
 * triggers wrote). Parameters after the shared ones: actor, role, via,
 * target, how the person was named (`userId` or `address`).
 */
function auditErasure(
  db: D1Database,
  parameters: ErasureParameters,
  who: AuditFields,
  elsewhere: ErasedCounts | undefined,
): D1PreparedStatement {
  // ?11: what the other D1 shards erased (src/d1/shards.ts), added to this database's counts.
  const counts = ERASED_TABLES.map(
    ({ name, table, where }) =>
      `(SELECT count(*) FROM ${table} WHERE ${where}) + coalesce(json_extract(?11, '$.${name}'), 0) AS ${name}`,
  )
  const names = ERASED_TABLES.map(({ name }) => name)
  return bindErasure(
    db,
    `WITH counted AS (SELECT ${counts.join(',\n')})
     INSERT INTO audit_log (at, actor, role, via, action, target, parameters, affected)
     SELECT ?4, ?6, ?7, ?8, 'recipient.erase', ?9,
       json_object('by', ?10, 'erased', json_object(${names.map((name) => `'${name}', ${name}`).join(', ')})),
       ${names.join(' + ')}
     FROM counted WHERE ${names.join(' + ')} > 0
     RETURNING parameters`,
    parameters,
    [who.actor, who.role, who.via, who.target, who.by, JSON.stringify(elsewhere ?? {})],
  )
}

/**
 * What an erasure is about to change in one database, per table, as one row
 * (to run first in the erasure's batch, whose one transaction makes the
 * counts exactly what changes): a D1 shard other than the primary counts its
 * part this way, and the primary's audit row adds it up.
 */
export function countErasure(db: D1Database, parameters: ErasureParameters): D1PreparedStatement {
  const counts = ERASED_TABLES.map(
    ({ name, table, where }) => `(SELECT count(*) FROM ${table} WHERE ${where}) AS ${name}`,
  )
  return bindErasure(db, `SELECT ${counts.join(',\n')}`, parameters)
}

/** Keeps the person's suppressions under their pseudonyms, the stronger entry winning as everywhere on the list. */
function pseudonymizeSuppressions(db: D1Database, parameters: ErasureParameters): D1PreparedStatement {
  return bindErasure(
    db,
    `INSERT INTO suppressions
       (address, cause, reason, until, source, notification_id, provider_event, created_at, updated_at)
     SELECT json_extract(p.value, '$[1]'), s.cause, 'an erased address (' || s.cause || ')', s.until, s.source,
       s.notification_id, s.provider_event, s.created_at, ?4
     FROM json_each(?3) p JOIN suppressions s ON s.address = json_extract(p.value, '$[0]')
     WHERE true
     ON CONFLICT (address) DO UPDATE SET cause = excluded.cause, reason = excluded.reason, until = excluded.until,
       source = excluded.source, notification_id = excluded.notification_id,
       provider_event = excluded.provider_event, updated_at = excluded.updated_at
     WHERE suppressions.until IS NOT NULL AND (excluded.until IS NULL OR excluded.until > suppressions.until)`,
    parameters,
  )
}

/**
 * The erasure's statements, bound, in the order they must run: the audit
 * row first (it counts what is about to change, adding what other shards
 * erased; without `who`, in a shard other than the primary, a count alone), the raw messages and
 * provider events before the notifications (they find the person's
 * notifications through the snapshot the notifications lose), the
 * suppressions' pseudonyms before the entries in clear go.
 */
export function erasureStatements(
  db: D1Database,
  parameters: ErasureParameters,
  who: AuditFields | undefined,
  elsewhere?: ErasedCounts,
): D1PreparedStatement[] {
  const bound = (sql: string) => bindErasure(db, sql, parameters)
  return [
    who ? auditErasure(db, parameters, who, elsewhere) : countErasure(db, parameters),
    eraseSentMessages(db, parameters),
    bound(`UPDATE delivery_events SET detail = NULL WHERE ${DELIVERY_EVENTS_TO_ERASE}`),
    eraseNotifications(db, parameters),
    // The message is replaced by a placeholder that replay refuses; an open one is discarded, since
    // there is no one left to deliver it to. An error or history that names the person goes too.
    bound(
      `UPDATE dead_letters SET ${erasedDeadLetter('?4', ANY_ADDRESS_IN('error'), ANY_ADDRESS_IN('history'))}
         WHERE ${DEAD_LETTERS_TO_ERASE}`,
    ),
    pseudonymizeSuppressions(db, parameters),
    bound(`DELETE FROM suppressions WHERE ${SUPPRESSIONS_TO_ERASE}`),

    bound(`DELETE FROM contacts WHERE ${CONTACTS_TO_ERASE}`),
    bound(`DELETE FROM preferences WHERE ${PREFERENCES_TO_ERASE}`),
    bound(`DELETE FROM reviewer_pool WHERE ${REVIEWERS_TO_ERASE}`),
    // The update trigger of audit_log (migration 0010) lets exactly this change through.
    bound(
      `UPDATE audit_log SET target =
           (SELECT json_extract(p.value, '$[1]') FROM json_each(?3) p WHERE json_extract(p.value, '$[0]') = lower(audit_log.target))
       WHERE ${AUDIT_TARGETS_TO_ERASE}`,
    ),
  ]
}
