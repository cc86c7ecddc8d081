/**
 * The repository's documents stay true to it: every relative link of the
 * README and docs/ resolves (file and heading), the variable tables of
 * docs/configuration.md are what the zod config schemas say today, the
 * module of docs/adding-an-event-type.md is the one the registry test runs,
 * and every step of docs/deploy.md that rests on Cloudflare or Resend links
 * the page of their documentation it follows.
 */
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { test } from 'node:test'
import { configurationDoc } from '../../scripts/config-docs.ts'
import { costChart, costDoc } from '../../scripts/cost.ts'

const ROOT = join(import.meta.dirname, '..', '..')

/** Markdown files a reader can open from the README: the README, bridge/README.md and docs/. */
function documents(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(ROOT, 'docs', name))
  return [join(ROOT, 'README.md'), join(ROOT, 'bridge', 'README.md'), ...docs]
}

/** The anchor a heading gets on GitHub: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N} -]/gu, '')
    .replace(/ /g, '-')
}

function anchorsOf(markdown: string): Set<string> {
  const withoutCode = markdown.replace(/^```[\s\S]*?^```/gm, '')
  return new Set([...withoutCode.matchAll(/^#{1,6} (.+)$/gm)].map((match) => slug(match[1] as string)))
}

test('every relative link of the README and docs/ resolves to a file, and a #heading to one of its headings', () => {
  const broken: string[] = []
  let checked = 0
  for (const file of documents()) {
    const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```/gm, '')
    for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1] as string
      if (/^[a-z]+:/i.test(target)) continue
      checked++
      const [path, anchor] = target.split('#') as [string, string | undefined]
      const resolved = path === '' ? file : join(dirname(file), path)
      const where = `${relative(ROOT, file)} → ${target}`
      if (!resolved.startsWith(`${ROOT}/`) && resolved !== ROOT) broken.push(`${where} (outside the repository)`)
      else if (!existsSync(resolved)) broken.push(`${where} (no such file)`)
      else if (anchor && !anchorsOf(readFileSync(resolved, 'utf8')).has(anchor))
        broken.push(`${where} (no such heading)`)
    }
  }
  assert.deepEqual(broken, [])
  assert.ok(checked >= 10, `only ${checked} links found: is the pattern still right?`)
})

test("every step of docs/deploy.md that leans on Cloudflare or Resend links their documentation's page", () => {
  const doc = readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8')
  // Each ## or ### section's own text, up to the next heading of either level.
  const sections = doc
    .split(/^(?=#{2,3} )/m)
    .filter((section) => /^#{2,3} /.test(section))
    .map((section) => ({
      heading: section.slice(0, section.indexOf('\n')),
      // What the section states in prose: code blocks are commands, not claims.
      prose: section.replace(/^```[\s\S]*?^```/gm, ''),
    }))
  const leaning = sections.filter(({ prose }) => /\b(Cloudflare|Resend|wrangler|workers\.dev)\b/i.test(prose))
  const unsourced = leaning
    .filter(({ prose }) => !/\]\(https:\/\/(developers\.cloudflare\.com|resend\.com)\//.test(prose))
    .map(({ heading }) => heading)
  assert.deepEqual(unsourced, [])
  assert.ok(leaning.length >= 8, `only ${leaning.length} sections name Cloudflare or Resend: is the split still right?`)
})

test('docs/configuration.md holds the variable tables the zod schemas make today (npm run docs:config)', () => {
  const committed = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8')
  assert.equal(committed, configurationDoc(committed))
})

test('docs/cost.md and its chart are what scripts/cost.ts makes of bench/results.json and its prices', () => {
  const committed = readFileSync(join(ROOT, 'docs', 'cost.md'), 'utf8')
  assert.equal(committed, costDoc(committed), 'run `npm run docs:cost`')
  const chart = readFileSync(join(ROOT, 'docs', 'images', 'cost-per-million.svg'), 'utf8')
  assert.equal(chart, costChart(), 'run `npm run docs:cost`')
})

test('docs/adding-an-event-type.md shows the module test/event-registry.test.ts sends end to end', () => {
  const doc = readFileSync(join(ROOT, 'docs', 'adding-an-event-type.md'), 'utf8')
  const shown = /```ts\n(import \{ z \} from 'zod'[\s\S]*?)```/.exec(doc)?.[1]
  const tested = readFileSync(join(ROOT, 'test', 'event-types', 'project-closed.ts'), 'utf8')
  // The same module, seen from src/events/ instead of test/event-types/.
  const asInSrc = tested
    .slice(tested.indexOf("import { z } from 'zod'"))
    .replaceAll("'../../src/contracts/", "'../contracts/")
    .replace("'../../src/events/define.ts'", "'./define.ts'")
  assert.equal(shown, asInSrc)
})

test('the Node example of docs/inbox.md signs a token the Worker takes for its user, and only with the right secret', async () => {
  const { recipientOfToken } = await import('../../src/inbox/token.ts')
  const text = readFileSync(join(ROOT, 'docs', 'inbox.md'), 'utf8')
  const example = /```js\n(import \{ createHmac \}[\s\S]*?)```/.exec(text)?.[1]
  assert.ok(example, 'docs/inbox.md has its Node example')
  // The example as a module of its own, loaded as the host application would load it.
  const url = `data:text/javascript;base64,${Buffer.from(example).toString('base64')}`
  const { inboxToken } = (await import(url)) as { inboxToken: (user: string, secret: string) => string }
  const secret = 'a-host-and-worker-shared-secret-0123456789'
  const now = Math.floor(Date.now() / 1000)
  const recipient = await recipientOfToken(inboxToken('user-42', secret), [secret], now)
  assert.equal(recipient.userId, 'user-42')
  assert.ok(recipient.expiresAt > now && recipient.expiresAt <= now + 3600)
  await assert.rejects(
    recipientOfToken(inboxToken('user-42', `${secret}-other`), [secret], now),
    /UNAUTHORIZED|not an inbox token/,
  )
})
