/**
 * `npm run migrate`: applies the D1 migrations to every database of
 * wrangler.toml — the primary (DB) and each shard (DB_1, DB_2, …: docs/scaling.md) —
 * locally by default, to the account's databases with `--remote`. `npm run
 * dev`, `npm start` and `npm run deploy` apply them the same way.
 */
import { spawnSync } from 'node:child_process'
import { unstable_readConfig } from 'wrangler'

/** The D1 bindings of wrangler.toml that hold the schema: DB and its shards, the primary first. */
export function shardBindings(path = 'wrangler.toml'): string[] {
  const config = unstable_readConfig({ config: path }) as unknown as { d1_databases: { binding: string }[] }
  return config.d1_databases
    .map((db) => db.binding)
    .filter((binding) => binding === 'DB' || /^DB_[1-9][0-9]?$/.test(binding))
    .sort((a, b) => (a === 'DB' ? -1 : b === 'DB' ? 1 : Number(a.slice(3)) - Number(b.slice(3))))
}

/** Applies the migrations to each of them; the exit status of the first that fails, else 0. */
export function migrateAll(where: '--local' | '--remote'): number {
  const env = { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' }
  for (const binding of shardBindings()) {
    const result = spawnSync('wrangler', ['d1', 'migrations', 'apply', binding, where], { stdio: 'inherit', env })
    if (result.error) throw result.error
    if (result.status !== 0) return result.status ?? 1
  }
  return 0
}

if (import.meta.main) process.exit(migrateAll(process.argv.includes('--remote') ? '--remote' : '--local'))
