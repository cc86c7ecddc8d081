/**
 * The names of the D1 shards (src/d1/shards.ts), apart from the code that
 * uses their bindings: the doctor and the deploy script read them in Node,
 * without the Workers types.
 */

/** The binding of shard `shard`: DB, DB_1, … */
export function dbBindingOf(shard: number): string {
  return shard === 0 ? 'DB' : `DB_${shard}`
}

/** The database name wrangler.toml gives shard `shard` by convention: notify-edge, notify-edge-1, … */
export function dbNameOf(base: string, shard: number): string {
  return shard === 0 ? base : `${base}-${shard}`
}
