/**
 * `npm run dev`: the Worker on 127.0.0.1:8787 with local D1, KV, Queues and email.
 * Creates .dev.vars from .dev.vars.example when missing and applies the D1
 * migrations locally first, to every shard (./migrate.ts), so a fresh clone needs nothing else.
 */
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync } from 'node:fs'
import { migrateAll } from './migrate.ts'

const env = { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' }

function run(args: string[]): void {
  const result = spawnSync('wrangler', args, { stdio: 'inherit', env, shell: false })
  if (result.error) throw result.error
  if (result.status !== 0) process.exit(result.status ?? 1)
}

if (!existsSync('.dev.vars')) {
  copyFileSync('.dev.vars.example', '.dev.vars')
  console.log('Created .dev.vars from .dev.vars.example (local tokens; git-ignored).')
}
const migrated = migrateAll('--local')
if (migrated !== 0) process.exit(migrated)
run(['dev', '--ip', '127.0.0.1', '--port', '8787', ...process.argv.slice(2)])
