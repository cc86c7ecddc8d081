// biome-ignore-all lint/performance/useDomNodeTextContent: these are Playwright's Locator#innerText (the text as rendered), not the DOM property
/**
 * The console in a real browser (Debian's chromium, driven by playwright-core)
 * against `wrangler dev`: an operator signs in, finds a dead letter of a
 * missing template, reads its event's story, fixes the template in the
 * editor, replays the whole filtered set after its preview, and the email is
 * in wrangler's local mail list and the changes in the audit trail. The flow
 * runs with JavaScript off; every page also passes axe (no serious or
 * critical violation) at 1280 and 390 px, has nothing wider than its box at
 * either width (with JavaScript on and off: the times' texts differ), and is
 * walked by keyboard alone. Times carry their UTC instant and read in the
 * browser's zone once its script runs. Screenshots at 1280 and 390 px go to
 * test-output/console/, with what each page measured (fit.json), and the
 * overview's charts once the cron has bucketed what the tests counted
 * (overview-charts-1280.png).
 */
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { after, before, test } from 'node:test'
import AxeBuilder from '@axe-core/playwright'
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core'
import { assertNoLeaks } from '../../support/child-output.ts'
import { type LocalWorker, startLocalWorker } from '../../support/local-worker.ts'
import { type Overflow, overflowsOf } from '../../support/page-fit.ts'
import { waitFor } from '../../support/wait.ts'

const ADMIN = 'console-test-admin-token-0123456789'
const VIEWER = 'console-test-viewer-token-0123456789'
const INGEST = 'console-test-ingest-token-0123456789'
const OUTPUT = 'test-output/console'
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

let worker: LocalWorker
let browser: Browser
/** Every page visited, for the axe, keyboard and screenshot passes. */
const visited = new Map<string, string>()

const api = (method: string, path: string, token: string, body?: unknown) => worker.api(method, path, token, body)

async function signIn(context: BrowserContext, token: string): Promise<Page> {
  const page = await context.newPage()
  await page.goto(`${worker.url}/console`)
  assert.match(page.url(), /\/console\/sign-in$/)
  // By keyboard: the token field, then Enter.
  await page.getByLabel('Token (admin or viewer)').focus()
  await page.keyboard.type(token)
  await page.keyboard.press('Enter')
  await page.waitForURL(`${worker.url}/console`)
  return page
}

/** Ingests a PIN verification decision as Kafka delivered it at `offset` of its partition, with `body` as its payload. */
async function ingestVerification(messageId: string, offset: number, body: Record<string, unknown>): Promise<void> {
  const posted = await api('POST', '/v1/ingest', INGEST, {
    events: [
      {
        source: 'kafka',
        origin: `kafka:pin.profile.verification-requests.v1/0@${offset}`,
        sourceMessageId: messageId,
        receivedAt: new Date().toISOString(),
        headers: { 'message-id': messageId, 'event-type': 'verification-completed', 'contract-version': '1' },
        body: JSON.stringify(body),
      },
    ],
  })
  assert.equal(posted.status, 202)
}

/** Notes a page for the later passes, by name. */
function visit(name: string, page: Page): void {
  visited.set(name, page.url())
}

before(async () => {
  mkdirSync(OUTPUT, { recursive: true })
  worker = await startLocalWorker(
    {
      ADMIN_TOKEN: ADMIN,
      INGEST_TOKEN: INGEST,
      VIEWER_TOKEN: VIEWER,
      DEFAULT_LOCALE: 'kk',
      // A digest closes two seconds after it opens, so the digest test sees its email.
      DIGEST_WINDOW_SECONDS: '2',
    },
    // The charts' buckets are the cron's: the overview's test runs it.
    { cron: true },
  )
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
})

after(async () => {
  await browser?.close()
  await worker?.stop()
  assertNoLeaks()
})

test('an operator fixes a missing template and replays the filtered set, with JavaScript off', async () => {
  // A dead letter: a decision for a kk-speaking owner, and no kk template.
  const owner = crypto.randomUUID()
  const address = `console-owner-${owner.slice(0, 8)}@example.com`
  assert.equal((await api('PUT', `/v1/contacts/${owner}`, ADMIN, { email: address, locale: 'kk' })).status, 200)
  const eventId = crypto.randomUUID()
  await ingestVerification(eventId, 7, {
    RequestId: crypto.randomUUID(),
    PersonId: crypto.randomUUID(),
    UserId: owner,
    Decision: 'approved',
  })
  await waitFor(
    async () => {
      const story = await api('GET', `/v1/events/${eventId}`, ADMIN)
      return story.status === 200 && (story.body.deadLetters as unknown[]).length > 0 ? true : undefined
    },
    'the dead letter',
    60_000,
  )

  const context = await browser.newContext({ javaScriptEnabled: false })
  const page = await signIn(context, ADMIN)
  visit('overview', page)
  assert.ok(await page.getByRole('heading', { name: 'Open dead letters' }).isVisible())

  // Search the dead letters by the event id; open the one found.
  await page.getByRole('navigation').getByRole('link', { name: 'Dead letters' }).click()
  await page.getByLabel('Search (event id, message id or error)').fill(eventId)
  await page.getByRole('button', { name: 'Filter' }).click()
  // Each click below loads a new page (JavaScript is off): waited for, so that nothing is read off the old one.
  await page.waitForURL((url) => url.searchParams.get('q') === eventId)
  visit('dead-letters', page)
  const rows = page.locator('tbody tr')
  assert.equal(await rows.count(), 1)
  assert.match((await rows.first().textContent()) ?? '', /NTF_TEMPLATE_NOT_RESOLVED/)
  await rows.first().getByRole('link').first().click()
  await page.waitForURL((url) => /^\/console\/dead-letters\/[^/]+$/.test(url.pathname))
  visit('dead-letter', page)
  assert.match(await page.locator('main').innerText(), /no active template for \(VerificationApproved, kk/)
  assert.match(await page.locator('pre').last().innerText(), /"Decision": "approved"/)

  // Its event's story.
  await page.getByRole('link', { name: eventId }).first().click()
  await page.waitForURL((url) => url.pathname === `/console/events/${eventId}`)
  visit('event-story', page)
  assert.match(await page.locator('main').innerText(), /NTF_TEMPLATE_NOT_RESOLVED/)

  // Fix the template: preview first, then save.
  await page.goto(`${worker.url}/console/templates/VerificationApproved/kk/email`)
  await page.getByLabel('Subject').fill('Верификация өтті')
  await page.getByLabel('Text part (Liquid)').fill('Сәлем!')
  await page.getByLabel('HTML part (Liquid)').fill('<p>Сәлем!</p>')
  await page.getByRole('button', { name: 'Preview with the example' }).click()
  // The answer is a new page (a form post): waited for, not read while the old one is still shown.
  await page.getByRole('heading', { name: 'Preview' }).waitFor()
  await page.getByRole('button', { name: 'Save as the new version' }).click()
  assert.match(await page.getByRole('status').innerText(), /Saved as version 1/)
  await page.goto(`${worker.url}/console/templates/VerificationApproved/kk/email`)
  visit('template', page)

  // Bulk replay of the filtered set: a preview with the count, then the confirmation.
  await page.goto(`${worker.url}/console/dead-letters?code=NTF_TEMPLATE_NOT_RESOLVED&status=open`)
  await page.getByRole('link', { name: 'Replay all matching…' }).click()
  await page.waitForURL((url) => url.pathname === '/console/dead-letters/bulk')
  visit('bulk-preview', page)
  const count = Number(/replays (\d+) open/.exec(await page.locator('.note').innerText())?.[1])
  assert.ok(count >= 1)
  await page.getByRole('button', { name: `Replay ${count}` }).click()
  assert.match(await page.getByRole('status').innerText(), new RegExp(`Replayed ${count} dead letter`))

  // The email is in wrangler's local mail list.
  await waitFor(
    async () => {
      const response = await fetch(`${worker.url}/cdn-cgi/local/explorer/api/local/email/sending?per_page=100`)
      const body = (await response.json()) as { result: { to: string[]; subject: string }[] }
      return body.result.some((mail) => mail.to.includes(address) && mail.subject === 'Верификация өтті')
        ? true
        : undefined
    },
    'the email',
    60_000,
  )

  // The audit trail names both changes, made through the console.
  await page.getByRole('navigation').getByRole('link', { name: 'Audit trail' }).click()
  await page.waitForURL((url) => url.pathname === '/console/audit')
  visit('audit', page)
  const trail = await page.locator('tbody').innerText()
  assert.match(trail, /admin token\s+console\s+template\.save\s+VerificationApproved\/kk\/email/)
  assert.match(trail, /admin token\s+console\s+dead-letters\.replay/)

  // One notification: masked and without its email, then revealed (audited), and its email in the
  // sandboxed frame (a read of its own, audited too).
  const story = await api('GET', `/v1/events/${eventId}`, ADMIN)
  const [notification] = story.body.notifications as { id: string }[]
  assert.ok(notification)
  await page.goto(`${worker.url}/console/notifications/${notification.id}`)
  visit('notification', page)
  assert.ok(!(await page.locator('main').innerText()).includes(address))
  assert.equal(await page.locator('iframe').count(), 0)
  const audited = async (action: string) =>
    (await api('GET', `/v1/audit?action=${action}&target=${notification.id}`, ADMIN)).body.items as unknown[]
  assert.equal((await audited('notification.reveal')).length, 0)
  await page.getByRole('button', { name: /Reveal the address/ }).click()
  assert.ok((await page.locator('main').innerText()).includes(address))
  assert.equal(await page.locator('iframe[sandbox=""]').count(), 1)
  assert.equal((await audited('notification.reveal')).length, 1)
  await waitFor(async () => ((await audited('notification.html')).length === 1 ? true : undefined), 'the frame read')
  await context.close()
})

test('a viewer sees the pages and none of the changes; a change posted anyway, or from another site, is refused', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false })
  const page = await signIn(context, VIEWER)
  await page.goto(`${worker.url}/console/dead-letters`)
  assert.equal(await page.getByRole('link', { name: 'Replay all matching…' }).count(), 0)
  // A viewer previews a template (a read) but has no Save button, and a save posted anyway is refused.
  await page.goto(`${worker.url}/console/templates/ResponseCreated/ru/email`)
  assert.equal(await page.getByRole('button', { name: 'Save as the new version' }).count(), 0)
  await page.getByRole('button', { name: 'Preview with the example' }).click()
  await page.getByRole('heading', { name: 'Preview' }).waitFor()
  const csrf = await page.locator('input[name="_csrf"]').first().inputValue()
  const save = await context.request.post(`${worker.url}/console/templates/ResponseCreated/ru/email/save`, {
    form: { _csrf: csrf, subject: 's', textBody: 't', htmlBody: 'h' },
    headers: { origin: worker.url },
  })
  assert.equal(save.status(), 403)
  const listed = await api('GET', '/v1/dead-letters?limit=1', ADMIN)
  const [letter] = listed.body.items as { id: string }[]
  const target = `${worker.url}/console/dead-letters/${letter?.id ?? 'none'}/replay`
  const asViewer = await context.request.post(target, { form: { _csrf: csrf }, headers: { origin: worker.url } })
  assert.equal(asViewer.status(), 403)
  // The admin's session, from a page of another site: refused by its Origin.
  const admin = await browser.newContext()
  const adminPage = await signIn(admin, ADMIN)
  const adminCsrf = await adminPage.locator('input[name="_csrf"]').first().inputValue()
  const crossSite = await admin.request.post(target, {
    form: { _csrf: adminCsrf },
    headers: { origin: 'https://evil.example' },
  })
  assert.equal(crossSite.status(), 403)
  // Without the form's token, even from the console's own origin: refused.
  const noToken = await admin.request.post(target, { form: {}, headers: { origin: worker.url } })
  assert.equal(noToken.status(), 403)
  await admin.close()
  await context.close()
})

test('with JavaScript on, the template editor previews as the operator types', async () => {
  const before = await api('GET', '/v1/templates/ResponseCreated/ru/email', ADMIN)
  const context = await browser.newContext()
  const page = await signIn(context, ADMIN)
  await page.goto(`${worker.url}/console/templates/ResponseCreated/ru/email`)
  assert.equal(await page.locator('#preview h2').count(), 0)
  await page.getByLabel('Subject').fill('Живой предпросмотр: {{ projectTitle }}')
  // No button pressed: the preview arrives by itself, rendered with the kind's example.
  await page.locator('#preview p', { hasText: 'Живой предпросмотр: Редизайн' }).waitFor({ timeout: 30_000 })
  // Nothing was saved by previewing.
  const after = await api('GET', '/v1/templates/ResponseCreated/ru/email', ADMIN)
  assert.deepEqual(after.body, before.body)
  await context.close()
})

test("a digested event's story names its digest and its email; the digest's page lists its events", async () => {
  // An owner who chose digests of responses (ru: this Worker's default locale has no such template).
  const owner = crypto.randomUUID()
  const address = `digest-owner-${owner.slice(0, 8)}@example.com`
  assert.equal((await api('PUT', `/v1/contacts/${owner}`, ADMIN, { email: address, locale: 'ru' })).status, 200)
  await worker.query(
    `INSERT INTO preferences (user_id, kind, channel, enabled, source, updated_at, mode)
     VALUES ('${owner}', 'ResponseCreated', 'email', 1, 'api', '${new Date().toISOString()}', 'digest')`,
  )
  const sample = JSON.parse(await readFile('examples/arthunt/response.created.json', 'utf8'))
  const eventIds = [crypto.randomUUID(), crypto.randomUUID()]
  const posted = await api('POST', '/v1/ingest', INGEST, {
    events: eventIds.map((eventId) => ({
      source: 'http',
      origin: 'console-test',
      sourceMessageId: eventId,
      receivedAt: new Date().toISOString(),
      headers: {},
      body: JSON.stringify({
        ...sample,
        envelope: { ...sample.envelope, eventId },
        data: { ...sample.data, recipient: { ...sample.data.recipient, userId: owner, email: address } },
      }),
    })),
  })
  assert.equal(posted.status, 202)
  const digest = await waitFor(
    async () => {
      const story = await api('GET', `/v1/events/${eventIds[0]}`, ADMIN)
      const [told] = (story.body.notifications ?? []) as { inDigest: { id: string; status: string } | null }[]
      return told?.inDigest?.status === 'sent' ? told.inDigest : undefined
    },
    'the digest sent',
    60_000,
  )

  const context = await browser.newContext({ javaScriptEnabled: false })
  const page = await signIn(context, ADMIN)
  await page.goto(`${worker.url}/console/events/${eventIds[0]}`)
  visit('digest-story', page)
  const story = await page.locator('main').innerText()
  assert.match(story, /digested/)
  assert.ok(!story.includes(address))
  const digests = page.getByRole('region', { name: 'Digests of the event' })
  assert.match(await digests.innerText(), new RegExp(`${digest.id}\\s+sent\\s+2\\s+sent `))

  await digests.getByRole('link', { name: digest.id }).click()
  await page.getByRole('heading', { name: 'Events told (2)' }).waitFor()
  visit('digest', page)
  assert.ok(!(await page.locator('main').innerText()).includes(address))
  const told = page.getByRole('region', { name: 'Events told in the digest' })
  assert.equal(await told.locator('tbody tr').count(), 2)
  await told.getByRole('link', { name: eventIds[1] as string }).click()
  // Waited for: the link leads to the event's story, or this times out.
  await page.waitForURL(`${worker.url}/console/events/${eventIds[1]}`)

  await page.goto(`${worker.url}/console`)
  assert.match(
    await page.getByRole('region', { name: 'Digests by kind, since the counters began' }).innerText(),
    /ResponseCreated\s+2\s+1\s+1\s+0/,
  )
  await context.close()
})

test('the overview charts the last hour and 7 days and rates each kind, with JavaScript off; its tables open', async () => {
  // The cron puts what the tests above counted into the minute that just ended.
  await worker.runCron()
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1280, height: 900 } })
  context.setDefaultTimeout(30_000)
  const page = await signIn(context, ADMIN)
  for (const [name, per] of [
    ['The last hour, per minute', 'minute'],
    ['The last 7 days, per hour', 'hour'],
  ]) {
    const region = page.getByRole('region', { name })
    // One chart per series, each an image named by its series and described by its numbers.
    assert.equal(await region.getByRole('img').count(), 9)
    const sent = region.getByRole('img', { name: `Sent, emails per ${per}` })
    assert.match((await sent.getAttribute('data-total')) ?? '', /^[1-9]\d*$/)
    // Behind them, the same numbers: the table opens without a script.
    await region.locator('summary').click()
    const totals = await region.getByRole('table').locator('tr.total').innerText()
    assert.match(totals, new RegExp(`^Total\\s+\\d+\\s+${await sent.getAttribute('data-total')}\\s`))
  }
  const rates = page.getByRole('region', { name: 'Rates by kind, last 24 hours' })
  assert.match(await rates.locator('tbody tr').first().innerText(), /^All kinds\s+[1-9]/)
  assert.equal(await page.getByRole('link', { name: 'Google, Email sender guidelines' }).count(), 1)
  // With both tables open, still no serious or critical axe violation (axe is a script: a context that runs them).
  const scripted = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  scripted.setDefaultTimeout(30_000)
  const opened = await signIn(scripted, ADMIN)
  for (const summary of await opened.locator('summary').all()) await summary.click()
  const { violations } = await new AxeBuilder({ page: opened }).analyze()
  assert.deepEqual(
    violations
      .filter((violation) => ['serious', 'critical'].includes(violation.impact ?? ''))
      .map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`),
    [],
  )
  await scripted.close()
  await page.reload()
  await page.screenshot({ path: `${OUTPUT}/overview-charts-1280.png`, fullPage: true })
  await context.close()
})

test('the lookups, the templates and the erasure form have something to show; a dead letter stays open', async () => {
  // An event whose payload is not its contract's: a dead letter nobody replays, for the overview's card.
  const messageId = crypto.randomUUID()
  await ingestVerification(messageId, 8, { Decision: 42 })
  await waitFor(
    async () => {
      const open = await api('GET', `/v1/dead-letters?status=open&q=${messageId}`, ADMIN)
      return (open.body.items as unknown[]).length > 0 ? true : undefined
    },
    'the open dead letter',
    60_000,
  )
  const userId = crypto.randomUUID()
  const contact = { email: `lookup-${userId.slice(0, 8)}@example.com`, locale: 'ru', timeZone: 'Europe/Moscow' }
  assert.equal((await api('PUT', `/v1/contacts/${userId}`, ADMIN, contact)).status, 200)
  assert.equal((await api('PUT', `/v1/reviewers/${userId}`, ADMIN)).status, 200)
  const context = await browser.newContext({ javaScriptEnabled: false })
  const page = await signIn(context, ADMIN)
  for (const [name, path, text] of [
    ['notifications', '/console/notifications', /The latest 100/],
    ['templates', '/console/templates', /VerificationApproved/],
    ['contacts', `/console/contacts?userId=${userId}`, new RegExp(userId)],
    ['erasures', '/console/erasures', /cannot be undone/],
    ['event-search', '/console/events', /Event id or source message id/],
  ] as const) {
    await page.goto(`${worker.url}${path}`)
    assert.match(await page.locator('main').innerText(), text, name)
    visit(name, page)
  }
  await context.close()
})

test('an in-app template is edited as its fields and previewed as the item a feed would show', async () => {
  // Scripts on: axe is a script (the page itself is visited with them off by the test of every page).
  const context = await browser.newContext()
  context.setDefaultTimeout(30_000)
  const page = await signIn(context, ADMIN)
  await page.goto(`${worker.url}/console/templates/ResponseCreated/ru/in-app`)
  visit('template-in-app', page)
  await page.getByLabel('Title').fill('{{ actorName }}: {{ projectTitle }}')
  await page.getByLabel('Action address').fill('not an address')
  await page.getByRole('button', { name: 'Preview with the example' }).click()
  await page.getByRole('heading', { name: 'Preview' }).waitFor()
  const item = await page.getByRole('article', { name: 'The item' }).innerText()
  assert.match(item, /Михаил Дизайнер: Редизайн лендинга/)
  assert.match(item, /none \(it needs a label and an http\(s\) address\)/)
  // The answer of a form post, which no address leads back to: checked here.
  assert.deepEqual(await checkPage(page, 'template-in-app-preview', { axe: true }), [])
  await context.close()
})

test("durations read in human units; every time carries its UTC instant and reads in the browser's zone", async () => {
  // A source far behind: 139 days of lag, as the gauge holds it in seconds.
  const measured = new Date(Date.now() - 4 * 60_000).toISOString()
  await worker.query(
    `INSERT INTO gauges (name, labels, value, updated_at)
     VALUES ('notify_consumer_lag_seconds', '{"source":"rabbitmq"}', 12010552.2, '${measured}')
     ON CONFLICT (name, labels) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
  )
  const lagOf = async (page: Page) =>
    page.getByRole('region', { name: 'Consumer lag by source' }).locator('tr', { hasText: 'rabbitmq' })

  // JavaScript off: the UTC time, readable, and the instant in the markup.
  const off = await browser.newContext({ javaScriptEnabled: false, timezoneId: 'Asia/Kathmandu' })
  const plain = await signIn(off, ADMIN)
  const row = await lagOf(plain)
  assert.match(await row.innerText(), /rabbitmq\s+139\sd\s/)
  const time = row.locator('time')
  assert.equal(await time.getAttribute('datetime'), measured)
  assert.equal(await time.getAttribute('title'), `${measured.slice(0, 10)} ${measured.slice(11, 19)} UTC`)
  assert.equal(await time.innerText(), `${measured.slice(0, 10)} ${measured.slice(11, 16)} UTC`)
  await off.close()

  // JavaScript on: the browser's zone (Kathmandu, UTC+5:45) and relative times in lists.
  const on = await browser.newContext({ timezoneId: 'Asia/Kathmandu' })
  const page = await signIn(on, ADMIN)
  const local = (await lagOf(page)).locator('time')
  assert.equal(await local.innerText(), '4 minutes ago')
  assert.match((await local.getAttribute('title')) ?? '', /GMT\+5:45.*UTC/)
  await page.goto(visited.get('dead-letter') as string)
  const history = page.getByRole('region', { name: 'Error history' }).locator('time').first()
  assert.match(await history.innerText(), /^\w{3} \d{1,2}, \d{4}, \d\d:\d\d GMT\+5:45$/)
  assert.match((await history.getAttribute('title')) ?? '', /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/)
  await on.close()
})

test('the dead-letter list and the overview refresh themselves in place, keeping the filters; without JavaScript by reloading the same address', async () => {
  const messageId = crypto.randomUUID()
  const address = `${worker.url}/console/dead-letters?q=${messageId}&status=open&refresh=5`
  const context = await browser.newContext()
  context.setDefaultTimeout(30_000)
  const page = await signIn(context, ADMIN)
  await page.goto(address)
  const list = page.getByRole('region', { name: 'Dead letters' })
  assert.equal(await list.locator('tbody').innerText(), 'Nothing here.')
  // Anything the page holds that a reload would lose.
  await page.evaluate(() => Object.assign(window, { unreloaded: true }))

  // A dead letter the filters match appears by itself, in the same page.
  await ingestVerification(messageId, 9, { Decision: 42 })
  await list.locator('tbody tr', { hasText: 'NTF_' }).waitFor()
  assert.equal(await page.evaluate(() => 'unreloaded' in window), true)
  assert.equal(page.url(), address)
  assert.equal(await page.getByLabel('Search (event id, message id or error)').inputValue(), messageId)
  assert.equal(await page.getByLabel('Status').inputValue(), 'open')
  assert.equal(await page.getByLabel('Refresh').inputValue(), '5')
  // Its times were shown in the browser's zone again.
  assert.match(await list.locator('time').first().innerText(), /ago|now/)

  // Filtering keeps the interval; changing the interval keeps the filters.
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL((url) => url.searchParams.get('refresh') === '5' && url.searchParams.get('q') === messageId)
  await page.getByLabel('Refresh').selectOption('15')
  await page.getByRole('button', { name: 'Apply' }).click()
  await page.waitForURL((url) => url.searchParams.get('refresh') === '15' && url.searchParams.get('q') === messageId)
  assert.equal(await page.getByLabel('Status').inputValue(), 'open')

  // A session that ended is said, and the page is not swapped for the sign-in form.
  await page.goto(address)
  await context.clearCookies()
  await page.locator('#refresh-state', { hasText: 'Signed out' }).waitFor()
  assert.equal(await list.locator('tbody tr', { hasText: 'NTF_' }).count(), 1)
  await context.close()

  // Without JavaScript: the same address again, by the meta refresh; the overview's every minute by default.
  const plain = await browser.newContext({ javaScriptEnabled: false })
  plain.setDefaultTimeout(30_000)
  const noScript = await signIn(plain, ADMIN)
  assert.equal(await noScript.locator('meta[http-equiv="refresh"]').getAttribute('content'), '60')
  assert.equal(await noScript.getByLabel('Refresh').inputValue(), '60')
  await noScript.goto(address)
  const reloaded = noScript.waitForEvent('framenavigated')
  assert.equal(await noScript.locator('meta[http-equiv="refresh"]').getAttribute('content'), '5')
  assert.equal((await reloaded).url(), address)
  await noScript.locator('tbody tr', { hasText: 'NTF_' }).waitFor()
  // Off is off.
  await noScript.goto(`${worker.url}/console?refresh=off`)
  assert.equal(await noScript.locator('meta[http-equiv="refresh"]').count(), 0)
  assert.equal(await noScript.getByLabel('Refresh').inputValue(), 'off')
  await plain.close()
})

/** Widths every page is checked at: a laptop and a phone. */
const WIDTHS = [1280, 390] as const
/** What each page measured, written beside the screenshots. */
const fits: Record<string, { width: number; overflows: Overflow[] }[]> = {}

/**
 * One page at both widths: its axe violations (serious or critical) and every
 * box wider than its content allows, as lines; a screenshot of each width.
 * At 1280 px nothing scrolls sideways; at 390 px a narrow table may scroll
 * inside its own named, focusable container, and a wide one (the dead-letter
 * list among them) stacks its rows into cards that fit.
 */
async function checkPage(page: Page, name: string, options: { axe: boolean }): Promise<string[]> {
  const problems: string[] = []
  fits[name] = []
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 900 })
    if (options.axe) {
      // The email's frame is the sender's content, sandboxed with scripts off: axe cannot run in it.
      const { violations } = await new AxeBuilder({ page }).exclude('iframe').analyze()
      for (const violation of violations) {
        if (!['serious', 'critical'].includes(violation.impact ?? '')) continue
        const nodes = violation.nodes.map((node) => node.target.join(' ')).join(', ')
        problems.push(`${name} at ${width} px: axe ${violation.id}: ${nodes}`)
      }
      await page.screenshot({ path: `${OUTPUT}/${name}-${width}.png`, fullPage: true })
    }
    const overflows = await overflowsOf(page)
    fits[name].push({ width, overflows })
    for (const { box, scrollWidth, clientWidth, scrollRegion, stacked } of overflows) {
      if (width < 1280 && scrollRegion && !stacked) continue
      problems.push(`${name} at ${width} px: ${box} is ${scrollWidth} px wide in ${clientWidth}`)
    }
  }
  await page.setViewportSize({ width: 1280, height: 900 })
  return problems
}

/** Tab from the top: every link, button and field is reached, in order, with no trap. */
async function checkKeyboard(page: Page, name: string): Promise<void> {
  // A <details>'s summary is reached by Tab too (the overview's chart tables).
  const focusable = await page
    .locator('a[href], button:not([disabled]), input:not([type="hidden"]), select, textarea, summary, [tabindex="0"]')
    .count()
  await page.locator('body').focus()
  const reached = new Set<string>()
  for (let step = 0; step < focusable + 1; step += 1) {
    await page.keyboard.press('Tab')
    reached.add(
      await page.evaluate(() => {
        const element = document.activeElement
        if (!element || element === document.body) return 'body'
        const all = Array.from(document.querySelectorAll('*'))
        return `${element.tagName}#${all.indexOf(element)}`
      }),
    )
  }
  reached.delete('body')
  assert.equal(reached.size, focusable, `${name}: ${reached.size} of ${focusable} reached by Tab`)
}

test('every page: no serious or critical axe violation and nothing wider than its box at 1280 and 390 px, with JavaScript on and off; usable by keyboard alone; screenshots', async () => {
  const problems: string[] = []
  const context = await browser.newContext({ timezoneId: 'Asia/Kathmandu' })
  const page = await signIn(context, ADMIN)
  for (const [name, url] of visited) {
    await page.goto(url)
    problems.push(...(await checkPage(page, name, { axe: true })))
    await checkKeyboard(page, name)
  }
  // On a phone the dead-letter list is a column of cards, each field under its column's name.
  await page.goto(visited.get('dead-letters') as string)
  await page.setViewportSize({ width: 390, height: 900 })
  const card = page.getByRole('region', { name: 'Dead letters' }).locator('tbody tr').first()
  assert.equal(await card.evaluate((row) => getComputedStyle(row).display), 'block')
  const labels = await card
    .locator('td')
    .evaluateAll((cells) => cells.map((cell) => getComputedStyle(cell, '::before').content))
  assert.ok(labels.includes('"Code"') && labels.includes('"Error"'), labels.join(' '))
  await page.setViewportSize({ width: 1280, height: 900 })
  // The answer of an erasure, a page no link leads back to.
  const userId = crypto.randomUUID()
  assert.equal(
    (await api('PUT', `/v1/contacts/${userId}`, ADMIN, { email: `erase-${userId.slice(0, 8)}@example.com` })).status,
    200,
  )
  await page.goto(`${worker.url}/console/erasures?userId=${userId}`)
  await page.getByLabel('I understand this cannot be undone').check()
  await page.getByRole('button', { name: 'Erase' }).click()
  await page.getByRole('heading', { name: 'Erased' }).waitFor()
  problems.push(...(await checkPage(page, 'erased', { axe: true })))
  await context.close()

  // Without JavaScript the times read in UTC, a little longer: the same pages fit too.
  const plain = await browser.newContext({ javaScriptEnabled: false })
  const noScript = await signIn(plain, ADMIN)
  for (const [name, url] of visited) {
    await noScript.goto(url)
    problems.push(...(await checkPage(noScript, `${name} (no script)`, { axe: false })))
  }
  await plain.close()
  writeFileSync(`${OUTPUT}/fit.json`, `${JSON.stringify(fits, null, 2)}\n`)
  assert.deepEqual(problems, [])
  assert.ok(visited.size >= 13)
})
