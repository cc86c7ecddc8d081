/**
 * Builds the inbox's browser files (packages/inbox) into dist/assets, which
 * the Worker serves as static assets (wrangler.toml `[assets]`) at a path that
 * names the package's version: /inbox-client/<version>/notify-inbox.js (the
 * element, with its client) and /inbox-client/<version>/client.js (the client
 * alone). Browsers keep them a day (a fix released without a new version
 * reaches every page by the next day); any origin may load them (a module
 * script from another origin needs CORS). wrangler runs this before
 * `wrangler dev` and `wrangler deploy` (`[build]`). The files are built
 * beside the served ones and then renamed into their place, so that a Worker
 * already serving them (another `wrangler dev` of the same checkout) finds
 * them missing only between two renames, not for a whole build.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { build } from 'esbuild'

const OUT = 'dist/assets'
const { version } = JSON.parse(readFileSync('packages/inbox/package.json', 'utf8')) as { version: string }

mkdirSync('dist', { recursive: true })
const fresh = mkdtempSync('dist/.assets-')
await build({
  entryPoints: {
    'notify-inbox': 'packages/inbox/src/notify-inbox.ts',
    client: 'packages/inbox/src/client.ts',
  },
  outdir: `${fresh}/inbox-client/${version}`,
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  sourcemap: 'linked',
  legalComments: 'none',
  logLevel: 'warning',
})
// Workers Static Assets read response headers from _headers
// (https://developers.cloudflare.com/workers/static-assets/headers/).
writeFileSync(
  `${fresh}/_headers`,
  `/inbox-client/*\n  Cache-Control: public, max-age=86400\n  Access-Control-Allow-Origin: *\n`,
)
// The old tree is moved aside, the new one renamed into place (each a single rename), the old one removed.
const old = `${fresh}-old`
if (existsSync(OUT)) renameSync(OUT, old)
renameSync(fresh, OUT)
rmSync(old, { recursive: true, force: true })
console.log(`inbox client ${version} built into ${OUT}/inbox-client/${version}/`)
