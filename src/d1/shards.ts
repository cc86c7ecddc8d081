/**
 * D1 past one database: DB_SHARDS databases, bound as DB (shard 0, the
 * primary), DB_1, DB_2, … Every per-recipient row lives in the shard of its
 * recipient, and every shard has the whole schema (the same migrations), so
 * the code that works on one shard is the code that works on one database:
 * it runs with an env of `shardEnvs`, whose `DB` is that shard. What only
 * operators write (templates, channel policies, the reviewer pool, the
 * audit log, console sessions, health checks) is read from and written to
 * the primary (`primaryDb`). One shard is the single database a deployment
 * always had: the same statements; only new ids carry their bucket.
 */

import { configOf, withBindings } from '../config.ts'
import { ApiError } from '../errors.ts'
import { dbBindingOf } from './shard-names.ts'

/**
 * Buckets a recipient hashes to. A bucket, not a shard, is what an id
 * carries, so that growing the shards (src/shards/grow.ts) moves whole buckets and no
 * id changes; 1,024 leaves every one of 16 shards 64 buckets.
 */
export const BUCKETS = 1024

const encoder = new TextEncoder()

/**
 * A recipient's bucket: the first two bytes of the sha256 of their user id,
 * modulo `BUCKETS`. Stable across isolates, deploys and shard counts.
 */
export async function bucketOf(key: string): Promise<number> {
  const digest = await crypto.subtle.digest('SHA-256', encoder.encode(key))
  return new DataView(digest).getUint16(0) % BUCKETS
}

/** The shard that holds a bucket, of `count`: the bucket modulo the count (docs/scaling.md, adding a shard). */
export function shardOfBucket(bucket: number, count: number): number {
  return count <= 1 ? 0 : bucket % count
}

/** The shard of a recipient, of `count`. */
export async function shardOfRecipient(key: string, count: number): Promise<number> {
  return count <= 1 ? 0 : shardOfBucket(await bucketOf(key), count)
}

const BUCKETED_ID = /^[a-z]+_b(\d{1,4})_/

/**
 * The bucket an id carries (`ntf_b517_…`, see src/notifications/row.ts), or
 * undefined for an id made before ids carried one: those rows are in the
 * primary, where every row was before there were shards.
 */
export function bucketOfId(id: string): number | undefined {
  const found = BUCKETED_ID.exec(id)
  const bucket = found ? Number(found[1]) : Number.NaN
  return Number.isInteger(bucket) && bucket < BUCKETS ? bucket : undefined
}

/** The shard holding the row an id names, of `count`. */
export function shardOfId(id: string, count: number): number {
  const bucket = bucketOfId(id)
  return bucket === undefined ? 0 : shardOfBucket(bucket, count)
}

/** Derived env → the primary database of the env it was derived from. */
const primaries = new WeakMap<object, D1Database>()
/** Derived env → its shard's index. */
const indexes = new WeakMap<object, number>()

/**
 * Every shard's database, in order; a shard the count asks for and the
 * Worker lacks is a configuration error naming the block to add.
 */
export function shardDatabases(env: Env, count: number): D1Database[] {
  return Array.from({ length: count }, (_, shard) => {
    const name = dbBindingOf(shard)
    const db = (env as unknown as Record<string, D1Database | undefined>)[name]
    if (db === undefined) {
      throw new ApiError(
        'CONFIG_INVALID',
        `DB_SHARDS is ${count}, but ${name} is not bound: add [[d1_databases]] binding = "${name}", database_name = "notify-edge-${shard}", migrations_dir = "migrations/d1" to wrangler.toml`,
      )
    }
    return db
  })
}

/**
 * Every shard's env, in order: `env` as the code of one shard sees it, its
 * `DB` the shard's database. Everything else — queues, KV, the parsed
 * configuration — is `env`'s.
 */
export function shardEnvs(env: Env, count: number): Env[] {
  return shardDatabases(env, count).map((db, shard) => derived(env, shard, db))
}

function derived(env: Env, shard: number, db: D1Database): Env {
  if (shard === 0) return env
  const made = withBindings(env, { DB: db })
  primaries.set(made, primaryDb(env))
  indexes.set(made, shard)
  return made
}

/** The primary database, from any shard's env: where operator-wide tables are read and written. */
export function primaryDb(env: Env): D1Database {
  return primaries.get(env) ?? env.DB
}

/** The primary database when `env` is a shard's other than the primary (`shardEnvs`); undefined when its `DB` is the primary. */
export function otherPrimaryOf(env: Env): D1Database | undefined {
  return primaries.get(env)
}

/** Which shard an env works on (`shardEnvs`); 0 for the primary. */
export function shardIndexOf(env: Env): number {
  return indexes.get(env) ?? 0
}

/**
 * A shard's statements and reads of the primary's operator-wide tables, in
 * one round trip when they are the same database (one shard: as before
 * there were shards), else the primary's first, then the shard's.
 *
 * @returns each list's results, in order
 */
export async function withOperatorReads(
  env: Env,
  shard: readonly D1PreparedStatement[],
  primary: readonly D1PreparedStatement[],
): Promise<[D1Result[], D1Result[]]> {
  const other = otherPrimaryOf(env)
  if (other === undefined) {
    const results = await env.DB.batch([...shard, ...primary])
    return [results.slice(0, shard.length), results.slice(shard.length)]
  }
  const operator = await other.batch([...primary])
  return [await env.DB.batch([...shard]), operator]
}

/** The database of the shard holding the row an id names (`shardOfId`). */
export function shardDbOfId(env: Env, id: string): D1Database {
  const count = configOf(env).DB_SHARDS
  return shardDatabases(env, count)[shardOfId(id, count)] as D1Database
}

/** The database of a recipient's shard of `count`. */
async function dbOfRecipient(env: Env, userId: string, count: number): Promise<D1Database> {
  return shardDatabases(env, count)[await shardOfRecipient(userId, count)] as D1Database
}

/** The database of the shard holding a recipient's rows. */
export function shardDbOfUser(env: Env, userId: string): Promise<D1Database> {
  return dbOfRecipient(env, userId, configOf(env).DB_SHARDS)
}

/**
 * The database a recipient's own change (an unsubscribe link) is written to:
 * their shard, and while the shards grow, their shard of the new count. The
 * grow copies a recipient's rows without replacing one already there and then
 * deletes the old ones, so the change stays where the new count looks
 * (src/shards/grow.ts); a recipient who does not move has the same shard in both.
 */
export function shardDbOfUserToWrite(env: Env, userId: string): Promise<D1Database> {
  const { DB_SHARDS, DB_SHARDS_GROWING_TO } = configOf(env)
  return dbOfRecipient(env, userId, DB_SHARDS_GROWING_TO > 0 ? DB_SHARDS_GROWING_TO : DB_SHARDS)
}

/** Every shard's database, the primary first. */
export function allShardDbs(env: Env): D1Database[] {
  return shardDatabases(env, configOf(env).DB_SHARDS)
}

/**
 * The same statements run in every shard (one batch each, side by side), and
 * each statement's rows from every shard together, the primary's first: what
 * an operator's read of everything about an event or an address sees.
 */
export async function rowsEverywhere(
  env: Env,
  statements: (db: D1Database) => D1PreparedStatement[],
): Promise<Record<string, unknown>[][]> {
  const batches: D1Result<Record<string, unknown>>[][] = await Promise.all(
    allShardDbs(env).map((db) => db.batch<Record<string, unknown>>(statements(db))),
  )
  return (batches[0] ?? []).map((_, index) => batches.flatMap((results) => results[index]?.results ?? []))
}

/**
 * Orders rows merged from several shards by these columns, as SQLite's
 * default (binary) collation orders their text: what one database's
 * `ORDER BY` would have given.
 */
export function byColumns(...columns: string[]) {
  return (a: Record<string, unknown>, b: Record<string, unknown>): number => {
    for (const column of columns) {
      const [x, y] = [String(a[column]), String(b[column])]
      if (x !== y) return x < y ? -1 : 1
    }
    return 0
  }
}

/**
 * Rows of several shards' counts, one per value of `keys`, every other
 * numeric column added up (a count, a counter's value); in the order each
 * key first appeared, the primary's first.
 */
export function sumRows<T extends Record<string, unknown>>(rows: readonly T[], keys: readonly string[]): T[] {
  const sums = new Map<string, Record<string, unknown>>()
  for (const row of rows) {
    const key = JSON.stringify(keys.map((column) => row[column]))
    const sum = sums.get(key)
    if (!sum) {
      sums.set(key, { ...row })
      continue
    }
    for (const [column, value] of Object.entries(row)) {
      if (!keys.includes(column) && typeof value === 'number') sum[column] = Number(sum[column] ?? 0) + value
    }
  }
  return [...sums.values()] as T[]
}
