/**
 * A wrangler.toml that binds a second D1 database (DB_1), for the harnesses that run the Worker over two
 * shards under `wrangler dev` (the bench's shards, `CHAOS_DB_SHARDS=2`): wrangler.toml's own, with its
 * paths made absolute and the block docs/scaling.md shows a deployment adding.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

/** wrangler.toml with a second D1 database bound as DB_1, in a folder of its own (paths made absolute). */
export function twoDatabaseConfig(): { path: string; remove: () => void } {
  const root = resolve(import.meta.dirname, '..')
  const folder = mkdtempSync(join(tmpdir(), 'notify-edge-shards-'))
  const text = readFileSync(join(root, 'wrangler.toml'), 'utf8')
    .replace('main = "src/index.ts"', `main = "${join(root, 'src', 'index.ts')}"`)
    .replaceAll('migrations_dir = "migrations/d1"', `migrations_dir = "${join(root, 'migrations', 'd1')}"`)
    // The inbox client's build runs in the checkout, and its output is served from there.
    .replace('command = "node scripts/build-client.ts"', `command = "node scripts/build-client.ts"\ncwd = "${root}"`)
    .replace('watch_dir = "packages/inbox/src"', `watch_dir = "${join(root, 'packages', 'inbox', 'src')}"`)
    .replace('directory = "dist/assets"', `directory = "${join(root, 'dist', 'assets')}"`)
  const path = join(folder, 'wrangler.toml')
  writeFileSync(
    path,
    `${text}
[[d1_databases]]
binding = "DB_1"
database_name = "notify-edge-1"
database_id = "00000000-0000-4000-8000-100000000001"
migrations_dir = "${join(root, 'migrations', 'd1')}"
`,
  )
  return { path, remove: () => rmSync(folder, { recursive: true, force: true }) }
}
