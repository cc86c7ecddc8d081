import { InboundEventSchema } from '../contracts/index.ts'
import { pseudonymOf, userPseudonymOf } from '../erasure/pseudonym.ts'
import { erasedDeadLetter } from '../erasure/statements.ts'
import type { DeadLetterRow } from './dead-letter-store.ts'

/**
 * What a dead letter could name a person by, as the pseudonyms an erasure
 * records (`erased_addresses`): every address in its message or its error,
 * and every string of its message taken as an address and as a user id.
 * `errorNames` are those of the error alone. `since`: the erasures that
 * count — for an inbound event, those at or after the bridge received it (an
 * event received after an erasure is new data, as src/materialize/ treats
 * it); for any other message, every one (a dispatch or a provider's report is
 * about mail to someone known before).
 */
export type NamedPeople = { names: string[]; errorNames: string[]; since: string }

// Bounds on what one dead letter is searched for: a message is at most a queue message (128 KB), and a
// person is named by a short string.
const LONGEST_NAME = 320
const MOST_STRINGS = 1000

// What ends an address inside text: a space, a quote, a bracket, a separator or a backslash (an escaped
// JSON string).
const DELIMITERS = new Set([...' \t\r\n"\'<>()[]{},;:\\'])
// The longest address SMTP carries (RFC 5321, a path of 256 octets less its brackets): no side of an @
// is read further.
const LONGEST_ADDRESS = 254

/**
 * The people a dead letter names, to be matched against the erasures that
 * ran while its message was on its way to notify-dlq (`eraseIfErased`).
 */
export async function namedPeople(row: DeadLetterRow, erasureKey: string): Promise<NamedPeople> {
  const body = JSON.parse(row.body) as unknown
  const inbound = InboundEventSchema.safeParse(body)
  const texts = [row.body]
  const strings = new Set<string>()
  collectStrings(body, strings)
  if (inbound.success) {
    const payload = payloadText(inbound.data.body, inbound.data.encoding)
    if (payload !== undefined) {
      texts.push(payload)
      try {
        collectStrings(JSON.parse(payload), strings)
      } catch {
        // Not JSON: its addresses are still found in its text.
      }
    }
  }
  const addresses = new Set(texts.flatMap(addressesIn))
  const candidates = [...strings].filter((value) => value.length > 0 && value.length <= LONGEST_NAME)
  const names = await Promise.all([
    ...[...addresses].map((address) => pseudonymOf(address, erasureKey)),
    ...candidates.map((value) => pseudonymOf(value, erasureKey)),
    ...candidates.map((value) => userPseudonymOf(value, erasureKey)),
  ])
  const errorNames = await Promise.all(addressesIn(row.error).map((address) => pseudonymOf(address, erasureKey)))
  return {
    names: [...new Set([...names, ...errorNames])],
    errorNames: [...new Set(errorNames)],
    since: inbound.success ? inbound.data.receivedAt : '',
  }
}

/**
 * Run in the same D1 batch right after the dead letter's upsert: when a
 * person it names was erased since (`NamedPeople`), it is left as the erasure
 * leaves one it finds (src/erasure/statements.ts) — the message replaced by
 * the placeholder replay refuses, an error naming them replaced, an open one
 * discarded. The erasure runs in one transaction, and so does this batch:
 * either the erasure came first and this finds its record, or it comes after
 * and finds the row.
 */
export function eraseIfErased(db: D1Database, id: string, people: NamedPeople, now: string): D1PreparedStatement {
  const erasedAmong = (list: string) =>
    `EXISTS (SELECT 1 FROM erased_addresses WHERE erased_at >= ?4 AND pseudonym IN (SELECT value FROM json_each(${list})))`
  return db
    .prepare(
      `UPDATE dead_letters SET ${erasedDeadLetter('?5', erasedAmong('?3'), erasedAmong('?3'))}
       WHERE id = ?1 AND ${erasedAmong('?2')}`,
    )
    .bind(id, JSON.stringify(people.names), JSON.stringify(people.errorNames), people.since, now)
}

/**
 * The inbound event's payload as text. Base64 that is not UTF-8 is decoded
 * all the same (what is not UTF-8 becomes U+FFFD), as the erasure searches
 * such a body (src/erasure/erase.ts): an address in it is still found.
 */
function payloadText(body: string, encoding: string | undefined): string | undefined {
  if (encoding !== 'base64') return body
  try {
    return new TextDecoder().decode(Uint8Array.from(atob(body), (char) => char.charCodeAt(0)))
  } catch {
    return undefined
  }
}

/**
 * The addresses in a text: around each @, what no delimiter ends. Read out
 * from each @, at most LONGEST_ADDRESS characters each way, so a body of a
 * hundred kilobytes without a delimiter costs a pass, not the square of its
 * length (a regular expression of the same rule backtracks over the whole
 * run from every start).
 */
function addressesIn(text: string): string[] {
  const found: string[] = []
  // The next @ is looked for past what this one read: an @ inside an address is part of it.
  for (let at = text.indexOf('@'), end = 0; at !== -1; at = text.indexOf('@', Math.max(at + 1, end))) {
    let start = at
    while (start > 0 && at - start < LONGEST_ADDRESS && !DELIMITERS.has(text[start - 1] as string)) start -= 1
    end = at + 1
    while (end < text.length && end - at <= LONGEST_ADDRESS && !DELIMITERS.has(text[end] as string)) end += 1
    if (start < at && end > at + 1) found.push(text.slice(start, end))
  }
  return found
}

/** Every string in a JSON value, keys included (a map keyed by user id names them). */
function collectStrings(value: unknown, into: Set<string>): void {
  if (into.size >= MOST_STRINGS) return
  if (typeof value === 'string') into.add(value)
  else if (Array.isArray(value)) for (const item of value) collectStrings(item, into)
  else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      into.add(key)
      collectStrings(item, into)
    }
  }
}
