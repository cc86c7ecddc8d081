/**
 * The D1 shards of the Worker under test (src/d1/shards.ts): one database in
 * the `worker` project, two in `two databases`. Helpers that read or seed a
 * recipient's rows go through these, so that a test runs the same in both.
 */
import { env } from 'cloudflare:workers'
import { configOf } from '../src/config.ts'
import { shardDatabases, shardOfId, shardOfRecipient } from '../src/d1/shards.ts'

/** Every shard's database, the primary first. */
export function shardDbs(): D1Database[] {
  return shardDatabases(env, configOf(env).DB_SHARDS)
}

/** The database holding a recipient's rows. */
export async function dbOfUser(userId: string): Promise<D1Database> {
  const dbs = shardDbs()
  return dbs[await shardOfRecipient(userId, dbs.length)] as D1Database
}

/** The database holding the notification an id names. */
export function dbOfNotification(id: string): D1Database {
  const dbs = shardDbs()
  return dbs[shardOfId(id, dbs.length)] as D1Database
}

/** The rows a query finds in every shard, the primary's first. */
export async function allShards<T>(query: (db: D1Database) => Promise<T[]>): Promise<T[]> {
  return (await Promise.all(shardDbs().map(query))).flat()
}

/** The rows a query with these parameters finds in one database. */
export async function rowsIn<T = Record<string, unknown>>(
  db: D1Database,
  sql: string,
  ...params: unknown[]
): Promise<T[]> {
  return (
    await db
      .prepare(sql)
      .bind(...params)
      .all<T>()
  ).results
}

/** The rows a query with these parameters finds in every shard, the primary's first. */
export function allRows<T = Record<string, unknown>>(sql: string, ...params: unknown[]): Promise<T[]> {
  return allShards((db) => rowsIn<T>(db, sql, ...params))
}

/** A fresh user id whose rows belong to shard `shard` of `count` (`shard` modulo the count). */
export async function userInShard(shard: number, count: number): Promise<string> {
  for (;;) {
    const id = crypto.randomUUID()
    if ((await shardOfRecipient(id, count)) === shard % count) return id
  }
}
