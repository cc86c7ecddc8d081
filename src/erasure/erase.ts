import type { Operator } from '../audit/operator.ts'
import { normalizeAddress } from '../suppression/suppression-store.ts'
import type { ErasureParameters } from './parameters.ts'
import { PSEUDONYM_PREFIX, pseudonymOf, userPseudonymOf } from './pseudonym.ts'
import { countErasure, ERASED_TABLES, type ErasedCounts, erasureStatements, recordErased } from './statements.ts'

/** Whom to erase: a recipient's user id, or an address. */
export type ErasureRequest = { userId: string } | { address: string }

/** Empties a user's in-app feed (src/inbox/inbox-feed.ts `erase`), whatever it holds. */
export type FeedEraser = (userId: string) => Promise<unknown>

/** What an erasure did: the audit trail's name for the person, and the rows changed per table. */
export type ErasureResult = { target: string; erased: ErasedCounts }

/**
 * The person an erasure is about, as far as D1 knows them: a user id leads to
 * the addresses of their contact, of their notifications' snapshots and of
 * the suppressions their notifications caused; an
 * address leads to the users whose contact or notifications carry it, and on
 * to those users' other addresses. Either way the same person is found,
 * whichever of their names the request gave.
 */
async function personOf(
  dbs: readonly D1Database[],
  request: ErasureRequest,
): Promise<{ users: string[]; addresses: string[] }> {
  const everywhere = async <T>(query: (db: D1Database) => Promise<T[]>) => (await Promise.all(dbs.map(query))).flat()
  const users =
    'userId' in request
      ? [request.userId]
      : [
          ...new Set(
            await everywhere(async (db) =>
              (
                await db
                  .prepare(
                    `SELECT user_id FROM contacts WHERE lower(email) = ?1
                     UNION SELECT recipient_user_id FROM notifications WHERE lower(recipient_email) = ?1`,
                  )
                  .bind(normalizeAddress(request.address))
                  .all<{ user_id: string }>()
              ).results.map((row) => row.user_id),
            ),
          ),
        ]
  // An address the person had before may be left only on the suppression list, once retention took it off
  // their notifications, or deleted the notifications themselves: the entry names the user it was about (and
  // the notification that caused it, for an entry written before it named the user).
  const found = await everywhere(async (db) =>
    (
      await db
        .prepare(
          `SELECT lower(email) AS address FROM contacts WHERE user_id IN (SELECT value FROM json_each(?1))
           UNION SELECT lower(recipient_email) FROM notifications
           WHERE recipient_user_id IN (SELECT value FROM json_each(?1)) AND recipient_email IS NOT NULL
           UNION SELECT address FROM suppressions
           WHERE user_id IN (SELECT value FROM json_each(?1)) AND address NOT LIKE '${PSEUDONYM_PREFIX}%'
           UNION SELECT s.address FROM suppressions s JOIN notifications n ON n.id = s.notification_id
           WHERE n.recipient_user_id IN (SELECT value FROM json_each(?1)) AND s.address NOT LIKE '${PSEUDONYM_PREFIX}%'`,
        )
        .bind(JSON.stringify(users))
        .all<{ address: string }>()
    ).results.map((row) => row.address),
  )
  const given = 'address' in request ? [normalizeAddress(request.address)] : []
  return { users, addresses: [...new Set([...given, ...found])] }
}

/**
 * Dead letters of inbound events whose original body travelled as base64 (it
 * was not UTF-8): SQL cannot look inside them, so they are decoded here and
 * searched like the others.
 */
async function base64DeadLetters(db: D1Database, users: string[], addresses: string[]): Promise<string[]> {
  const { results } = await db
    .prepare(
      `SELECT id, body FROM dead_letters
       WHERE instr(body, '"encoding":"base64"') > 0 AND body NOT LIKE '{"notifyEdgeErased":%'`,
    )
    .all<{ id: string; body: string }>()
  return results
    .filter((row) => {
      const message = JSON.parse(row.body) as { body?: unknown; encoding?: unknown }
      if (message.encoding !== 'base64' || typeof message.body !== 'string') return false
      let text: string
      try {
        text = new TextDecoder().decode(Uint8Array.from(atob(message.body), (char) => char.charCodeAt(0)))
      } catch {
        return false
      }
      const lower = normalizeAddress(text)
      return addresses.some((address) => lower.includes(address)) || users.some((id) => text.includes(`"${id}"`))
    })
    .map((row) => row.id)
}

/**
 * Erases a recipient from every table of every D1 shard (`dbs`, the primary
 * first), each shard in one D1 batch (one transaction), the primary's with
 * the audit row:
 *
 * - contacts, preferences and the reviewer pool: their rows are deleted;
 * - notifications: the recipient snapshot, subject, bodies, unsubscribe link
 *   and model go, ids, status and times stay; one not yet sent ends
 *   `undeliverable`;
 * - sent messages: deleted; delivery events: their detail goes;
 * - dead letters whose message names the person: the message is replaced by
 *   a placeholder (replay refuses it), an open one is discarded;
 * - suppressions: kept, under the address's pseudonym only, so an address that
 *   bounced stays suppressed (the dispatch gate matches the pseudonym);
 * - the addresses' and user ids' pseudonyms are recorded (`erased_addresses`):
 *   what a provider reports about an address later — a bounce, a complaint —
 *   is kept under the pseudonym, its text dropped (src/delivery/); an event
 *   that was on its way writes nothing of them (src/materialize/);
 * - the audit trail: a target that was one of the addresses becomes its
 *   pseudonym, and the erasure's own row names the user id or the pseudonym;
 * - each user's in-app feed (`eraseFeed`): emptied, made again under another
 *   name, its open sockets closed.
 *
 * Erasing again finds nothing left and changes nothing (no second audit row).
 * A dead letter of a message still on its way to notify-dlq is stored after
 * the erasure as this leaves one (src/dead-letters/late-erasure.ts). What
 * cannot be reached from here: a name that appears in other people's emails
 * (an actor's name is not stored apart).
 */
export async function eraseRecipient(
  dbs: readonly D1Database[],
  erasureKey: string,
  operator: Operator,
  request: ErasureRequest,
  now: Date,
  eraseFeed: FeedEraser = async () => {},
): Promise<ErasureResult> {
  const [primary, ...others] = dbs as [D1Database, ...D1Database[]]
  const { users, addresses } = await personOf(dbs, request)
  // The in-app feeds first, while the rows that lead to the user ids are still there: erasing again after a
  // failure further on finds them again. And again at the end, for an item a delivery in flight added meanwhile.
  await Promise.all(users.map((user) => eraseFeed(user)))
  const pairs = await Promise.all(addresses.map(async (address) => [address, await pseudonymOf(address, erasureKey)]))
  const letters = (await Promise.all(dbs.map((db) => base64DeadLetters(db, users, addresses)))).flat()
  const parameters: ErasureParameters = [
    JSON.stringify(users),
    JSON.stringify(addresses),
    JSON.stringify(pairs),
    now.toISOString(),
    JSON.stringify(letters),
  ]
  const target = 'userId' in request ? request.userId : await pseudonymOf(request.address, erasureKey)
  const pseudonyms = [
    ...pairs.map(([, pseudonym]) => pseudonym as string),
    ...(await Promise.all(users.map((user) => userPseudonymOf(user, erasureKey)))),
  ]
  // With D1 shards, the primary's part first, its audit row adding what each other shard is about to
  // erase (counted just before), then each other shard's part in a transaction of its own. The primary
  // goes first because the person is found through rows an erasure removes: were another shard erased and
  // the primary's write then failed, erasing again would no longer find the user ids that the primary's
  // reviewer entry and dead letters name. This way a failure leaves the other shards unerased, and
  // erasing again finds the person there (its audit row counts what that second request erased).
  const elsewhere = zero()
  for (const db of others) {
    const part = await countErasure(db, parameters).first<ErasedCounts>()
    for (const { name } of ERASED_TABLES) elsewhere[name] += Number(part?.[name] ?? 0)
  }
  const statements = erasureStatements(
    primary,
    parameters,
    {
      actor: operator.name,
      role: operator.role,
      via: operator.via,
      target,
      by: 'userId' in request ? 'userId' : 'address',
    },
    elsewhere,
  )
  const [audited] = await primary.batch<{ parameters: string }>([
    ...statements,
    recordErased(primary, pseudonyms, now.toISOString()),
  ])
  for (const db of others) {
    await db.batch([...erasureStatements(db, parameters, undefined), recordErased(db, pseudonyms, now.toISOString())])
  }
  await Promise.all(users.map((user) => eraseFeed(user)))
  const row = audited?.results[0]
  const erased = row ? (JSON.parse(row.parameters) as { erased: ErasedCounts }).erased : zero()
  return { target, erased }
}

function zero(): ErasedCounts {
  return Object.fromEntries(ERASED_TABLES.map(({ name }) => [name, 0])) as ErasedCounts
}
