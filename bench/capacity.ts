/**
 * `npm run bench` (BENCH_ONLY=capacity): what one email costs to keep in D1,
 * and how many emails a month one database holds and carries.
 *
 * N.capacity events go through a fresh Worker whose resend transport points at
 * the provider fake, which posts each accepted email's `email.sent` and
 * `email.delivered` to the Worker's webhook, as Resend does: every row an email
 * leaves behind is there, its delivery events included. Then:
 *
 * - **bytes per email, per table**: the local D1 is a SQLite file; SQLite's own
 *   `dbstat` gives the bytes each table and each of its indexes use in their
 *   pages (page size less unused space), divided by N. D1's own figure for the
 *   whole database (`meta.size_after`) is read beside it.
 * - **rows written, read, statements and database time per email**, summed
 *   from the Worker's `invocation.cost` lines, for the pipeline and for the
 *   delivery-event path apart.
 * - **the steady-state size** at a monthly volume: each table's bytes per email
 *   times the emails of the days it keeps them (its retention). Every kind ages
 *   out, so this is the size the database settles at.
 * - **the capacity**: the monthly volume whose steady state fills 70 % of D1's
 *   10 GB (30 % headroom), and the volume whose database time fills 70 % of one
 *   database's single writer.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { configOf } from '../src/config.ts'
import { startLocalWorker } from '../support/local-worker.ts'
import { startProviderFake } from '../support/provider-fake.ts'
import { waitFor } from '../support/wait.ts'
import { costLines, costPer, DELIVERY_PATH, messagesRead } from './costs.ts'
import { goals, N, progress, results } from './lib.ts'
import { BENCH_TOKEN_VARIABLES, BENCH_TOKENS, benchEvent, ingestRate, pipelineAt } from './pipeline.ts'

/** D1's limit on one database: 10 GB, "cannot be further increased" (developers.cloudflare.com/d1/platform/limits/). */
export const D1_MAX_BYTES = 10 * 1000 ** 3
/** What the capacity leaves free of that limit, and of the writer's time. */
export const HEADROOM = 0.3
/** The goal of the capacity table: emails a month one database holds, with the headroom. */
const GOAL_EMAILS_A_MONTH = 10_000_000
const DAYS_A_MONTH = 365.25 / 12
const SECONDS_A_MONTH = DAYS_A_MONTH * 86_400
const API_KEY = 'bench-capacity-key'
const WEBHOOK_SECRET = 'whsec_dGVzdC1yZXNlbmQtd2ViaG9vay1zZWNyZXQ='

/** Bytes of each table with its indexes, by table, from SQLite's `dbstat` over the database file. */
function bytesByTable(file: string): Map<string, number> {
  const copy = mkdtempSync(join(tmpdir(), 'notify-edge-capacity-'))
  try {
    // A consistent copy: the Worker's database is in WAL mode and still open.
    const snapshot = join(copy, 'd1.sqlite')
    execFileSync('sqlite3', [file, `.backup '${snapshot}'`])
    const out = execFileSync(
      'sqlite3',
      [
        '-separator',
        '\t',
        snapshot,
        `SELECT coalesce(m.tbl_name, s.name), sum(s.pgsize - s.unused)
           FROM dbstat s LEFT JOIN sqlite_schema m ON m.name = s.name GROUP BY 1`,
      ],
      { encoding: 'utf8' },
    )
    return new Map(
      out
        .trim()
        .split('\n')
        .map((line) => line.split('\t'))
        .map(([table, bytes]) => [table as string, Number(bytes)]),
    )
  } finally {
    rmSync(copy, { recursive: true, force: true })
  }
}

/** The bytes of the content a notification loses at its content retention, summed over every notification. */
function contentBytes(file: string): number {
  const columns = [
    'recipient_email',
    'recipient_name',
    'time_zone',
    'recipient_hash',
    'subject',
    'text_body',
    'html_body',
    'unsubscribe_url',
    'model',
  ]
  const sum = columns.map((column) => `coalesce(length(CAST(${column} AS BLOB)), 0)`).join(' + ')
  return Number(execFileSync('sqlite3', [file, `SELECT sum(${sum}) FROM notifications`], { encoding: 'utf8' }).trim())
}

/** The local D1's SQLite file under a `wrangler dev` state directory. */
function databaseFile(state: string): string {
  const folder = join(state, 'v3', 'd1', 'miniflare-D1DatabaseObject')
  const name = readdirSync(folder).find((entry) => /^[0-9a-f]{64}\.sqlite$/.test(entry))
  if (!name) throw new Error(`no D1 database file in ${folder}`)
  return join(folder, name)
}

/** Days each table keeps what an email leaves in it, by the default configuration; `null`: kept until it is erased. */
export function retentionDays(): Record<string, number | null> {
  // The required variables have no default; the retentions are read as a deployment leaves them.
  const config = configOf({
    ...BENCH_TOKEN_VARIABLES,
    EMAIL_FROM: 'bench@notify-edge.example',
    PUBLIC_URL: 'https://notify-edge.example.workers.dev',
    UNSUBSCRIBE_SIGNING_KEY: 'bench-unsubscribe-signing-key-0123456789',
  })
  return {
    processed_marks: config.PROCESSED_EVENTS_RETENTION_DAYS,
    notifications: config.notificationRetentionDays,
    'notifications (content)': config.NOTIFICATION_CONTENT_RETENTION_DAYS,
    sent_messages: config.SENT_MESSAGE_RETENTION_DAYS,
    // Every event here names its notification, and leaves with its row.
    delivery_events: config.notificationRetentionDays,
    send_batches: config.notificationRetentionDays,
  }
}

/** The per-email rows retention deletes, by table: each ages out and goes. */
const AGEING = ['processed_marks', 'notifications', 'delivery_events', 'send_batches', 'sent_messages']

/**
 * What retention itself costs: the cron run at a time past every kind's
 * retention, until nothing these emails left is there (each run deletes at
 * most RETENTION_MAX_CHUNKS chunks of each table). Its `invocation.cost`
 * lines (handler `cron`) give its rows written and read per email; the rows
 * still there after the runs are reported, and are expected to be none.
 */
async function retentionOf(
  local: Awaited<ReturnType<typeof startLocalWorker>>,
  n: number,
  days: Record<string, number | null>,
): Promise<{ cost: Record<string, number>; runs: number; left: number }> {
  const longest = Math.max(...Object.values(days).filter((value): value is number => value !== null))
  const at = new Date(Date.now() + (longest + 1) * 86_400_000)
  const before = local.output().length
  const count = `SELECT ${AGEING.map((table) => `(SELECT count(*) FROM ${table})`).join(' + ')} AS n`
  let runs = 0
  let left = Number.POSITIVE_INFINITY
  while (left > 0 && runs < 5) {
    await local.runCron(at)
    runs += 1
    const [row] = await local.query(count)
    left = Number(row?.n)
  }
  const lines = await waitFor(() => {
    const found = costLines(local.output().slice(before), new Set(['cron']))
    return found.length >= runs ? found : undefined
  }, "the cron's cost lines")
  return { cost: costPer(lines, n), runs, left }
}

/** Rounds to `digits` significant decimals for the report. */
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

export async function benchCapacity() {
  const n = N.capacity
  progress(`capacity: ${n} emails through the resend transport and their delivery events, then D1's bytes per email`)
  const provider = await startProviderFake({
    failureRate: 0,
    rateLimitRate: 0,
    apiKey: API_KEY,
    requestsPerSecond: 100_000,
  })
  const local = await startLocalWorker(
    {
      ...BENCH_TOKEN_VARIABLES,
      LOG_LEVEL: 'info',
      EMAIL_TRANSPORT: 'resend',
      RESEND_API_KEY: API_KEY,
      RESEND_API_URL: provider.url,
      RESEND_REQUESTS_PER_SECOND: '500',
      RESEND_WEBHOOK_SECRET: WEBHOOK_SECRET,
      // As deployed, keeping no exact message: the harness keeps it for the tests that read it.
      SENT_MESSAGE_RETENTION_DAYS: '0',
    },
    { cron: true },
  )
  try {
    provider.setWebhook({ url: `${local.url}/v1/webhooks/resend`, secret: WEBHOOK_SECRET })
    const before = local.output().length
    await ingestRate(
      pipelineAt(local.url, BENCH_TOKENS),
      Array.from({ length: n }, () => benchEvent()),
    )
    // Two events per email: `email.sent` and `email.delivered`, each stored once it is consumed.
    await waitFor(
      async () => {
        const [row] = await local.query('SELECT count(*) AS n FROM delivery_events')
        return Number(row?.n) >= 2 * n ? true : undefined
      },
      'every delivery event stored',
      600_000,
    )
    const pipeline = await waitFor(() => {
      const lines = costLines(local.output().slice(before))
      const done = messagesRead(lines, 'notify-events') >= n && messagesRead(lines, 'notify-dispatch') >= n
      return done ? lines : undefined
    }, 'the pipeline cost lines')
    const delivery = await waitFor(() => {
      const lines = costLines(local.output().slice(before), DELIVERY_PATH)
      return messagesRead(lines, 'notify-email-events') >= 2 * n ? lines : undefined
    }, 'the delivery-event cost lines')
    const file = databaseFile(local.state)
    const tables = bytesByTable(file)
    const content = contentBytes(file)
    const days = retentionDays()
    const perEmail: Record<string, number> = {}
    const kept: Record<string, number | null> = {}
    for (const table of Object.keys(days)) {
      if (table === 'notifications (content)') continue
      const bytes = tables.get(table) ?? 0
      if (table === 'notifications') {
        perEmail['notifications (content)'] = round(content / n, 0)
        perEmail.notifications = round((bytes - content) / n, 0)
      } else perEmail[table] = round(bytes / n, 0)
    }
    for (const [table, value] of Object.entries(days)) kept[table] = value
    // Bytes × days per email a day: the steady state is this times the emails a day.
    const byteDays = Object.entries(perEmail).reduce(
      (sum, [table, bytes]) => sum + bytes * (kept[table] ?? Number.POSITIVE_INFINITY),
      0,
    )
    const steadyBytesAt = (emailsAMonth: number) => (emailsAMonth / DAYS_A_MONTH) * byteDays
    const storageCapacity = Number.isFinite(byteDays)
      ? Math.floor((D1_MAX_BYTES * (1 - HEADROOM)) / (byteDays / DAYS_A_MONTH))
      : 0
    // What Workers Logs would bill: every line the Worker logged for these emails, at the default level.
    const logLines = local
      .output()
      .slice(before)
      .split('\n')
      .filter((line) => line.includes('"event":"')).length
    const pipelineCost = costPer(pipeline, n)
    const deliveryCost = costPer(delivery, n)
    const retention = await retentionOf(local, n, days)
    const msPerEmail = (pipelineCost.d1_ms ?? 0) + (deliveryCost.d1_ms ?? 0)
    const writerCapacity = msPerEmail > 0 ? Math.floor((SECONDS_A_MONTH * 1000 * (1 - HEADROOM)) / msPerEmail) : 0
    results.capacity = {
      emails: n,
      bytes_per_email: perEmail,
      retention_days: Object.fromEntries(Object.entries(kept).map(([table, value]) => [table, value ?? 'forever'])),
      other_tables_bytes: Object.fromEntries([...tables].filter(([table]) => !(table in perEmail))),
      pipeline_per_email: pipelineCost,
      delivery_events_per_email: deliveryCost,
      retention_per_email: retention.cost,
      retention_runs: retention.runs,
      rows_left_after_retention: retention.left,
      byte_days_per_email: Math.round(byteDays),
      log_lines_per_email: round(logLines / n),
      steady_state_gb_at_10m_a_month: Number.isFinite(byteDays) ? round(steadyBytesAt(10_000_000) / 1e9) : 'unbounded',
      emails_a_month_storage_capacity: storageCapacity,
      emails_a_month_writer_capacity: writerCapacity,
    }
    goals.push({
      name: 'emails a month one D1 holds at the default retention, 30 % headroom',
      value: storageCapacity.toLocaleString('en'),
      goal: `≥ ${GOAL_EMAILS_A_MONTH.toLocaleString('en')}`,
      met: storageCapacity >= GOAL_EMAILS_A_MONTH,
    })
    goals.push({
      name: "rows of these emails left once retention's days passed",
      value: String(retention.left),
      goal: '0',
      met: retention.left === 0,
    })
    goals.push({
      name: 'rows written per email',
      value: String(pipelineCost.d1_rows_written),
      goal: '≤ 10',
      met: (pipelineCost.d1_rows_written ?? 0) <= 10,
    })
  } finally {
    await local.stop()
    provider.close()
  }
}
