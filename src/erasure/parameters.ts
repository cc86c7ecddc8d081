/**
 * The parameters every statement of an erasure binds, by number: ?1 the JSON
 * array of the person's user ids, ?2 the JSON array of their addresses (as the
 * suppression list compares them: ASCII letters lower-cased, which is SQLite's
 * `lower()`), ?3 the JSON array of [address, pseudonym] pairs, ?4 now, ?5 the
 * JSON array of further dead-letter ids. One numbering for all, so that the
 * conditions the audit row counts with are the very ones the changes use.
 */
export type ErasureParameters = readonly [users: string, addresses: string, pairs: string, now: string, letters: string]

/**
 * `sql` prepared and bound to the erasure's parameters (then `extra`, from
 * ?6), as many as its highest `?n` uses: D1 refuses a statement given more
 * values than it has parameters.
 */
export function bindErasure(
  db: D1Database,
  sql: string,
  parameters: ErasureParameters,
  extra: readonly unknown[] = [],
): D1PreparedStatement {
  const highest = Math.max(0, ...[...sql.matchAll(/\?(\d+)/g)].map((match) => Number(match[1])))
  return db.prepare(sql).bind(...[...parameters, ...extra].slice(0, highest))
}
