#!/usr/bin/env node
/**
 * The operators' command line for notify-edge, over its HTTP API.
 *
 *   notify-edge dlq list [--status S] [--code C] [--queue Q] [--source S] [--kind K] [--since T] [--until T] [--limit N] [--all]
 *   notify-edge dlq show <id>
 *   notify-edge dlq replay <id>
 *   notify-edge dlq replay --filter [--status S] [--code C] … [--max N] [--dry-run]
 *   notify-edge dlq discard <id> --reason "…"
 *   notify-edge events show <eventId>
 *   notify-edge notifications show <id> [--reveal] [--raw]
 *   notify-edge suppressions list [--cause C] [--source S] [--active true|false] [--all]
 *   notify-edge suppressions show|remove <address>
 *   notify-edge suppressions add <address> --reason "…" [--until ISO]
 *   notify-edge erase --user-id <id> | --address <address>
 *   notify-edge cancel <key> [--reason "…"]
 *   notify-edge cancel --filter [--kind K] [--user-id U] [--key-prefix P] [--since T] [--until T] [--dry-run]
 *   notify-edge smoke --to <address> [--timeout S]
 *   notify-edge doctor [--config wrangler.toml]
 *   notify-edge shards grow --to N [--limit L]
 *
 * Every command takes --json. NOTIFY_EDGE_URL (default http://127.0.0.1:8787) and
 * NOTIFY_EDGE_TOKEN (the admin token) come from the environment; `smoke` also
 * needs NOTIFY_EDGE_INGEST_TOKEN (the ingest token: it sends through ingest);
 * `doctor` needs them only to ask the deployed Worker too.
 */
import { parseArgs } from 'node:util'
import { auditList } from './audit.ts'
import { cancelCommand } from './cancel.ts'
import { createClient } from './client.ts'
import { doctorCommand } from './doctor.ts'
import { eraseCommand, showNotification, suppressionsCommand } from './recipients.ts'
import { growShards } from './shards.ts'
import { smoke } from './smoke.ts'
import { renderTable } from './table.ts'

const USAGE = `usage:
  notify-edge dlq list [--status open|replayed|discarded] [--code C] [--queue Q] [--source S] [--kind K]
                       [--since ISO] [--until ISO] [--limit N] [--all] [--json]
  notify-edge dlq show <id> [--json]
  notify-edge dlq replay <id> [--json]
  notify-edge dlq replay --filter [--status S] [--code C] [--queue Q] [--source S] [--kind K] [--max N] [--dry-run] [--json]
  notify-edge dlq discard <id> --reason "why" [--json]
  notify-edge events show <eventId> [--json]
  notify-edge notifications show <id> [--reveal] [--raw] [--json]
                       (--reveal: the address, name and subject; --raw: the message as sent; both audited)
  notify-edge suppressions list [--cause C] [--source S] [--active true|false] [--limit N] [--all] [--json]
  notify-edge suppressions show <address> [--json]
  notify-edge suppressions add <address> --reason "why" [--until ISO] [--json]
  notify-edge suppressions remove <address> [--json]
  notify-edge audit list [--action A] [--actor X] [--target T] [--since ISO] [--until ISO] [--limit N] [--all] [--json]
  notify-edge erase --user-id <id> | --address <address> [--json]
  notify-edge cancel <key> [--reason "why"] [--json]
                       (withdraws what the key notified and has not gone out; an event of it that comes later
                        creates nothing; prints each notification's outcome)
  notify-edge cancel --filter [--kind K] [--user-id U] [--key-prefix P] [--since ISO] [--until ISO] [--dry-run]
                       [--reason "why"] [--json]
                       (cancels every key whose notifications match and have not gone out, at most 100 a run)
  notify-edge smoke --to <address> [--timeout S] [--json]
                       (one test event through ingest to that address, followed hop by hop:
                        accepted, materialized, claimed, sent, delivered; S seconds per hop, default 60)
  notify-edge doctor [--config wrangler.toml] [--json]
                       (what stands between this deployment and a delivered email, each with its fix; exit 1 on a
                        blocker. Judges wrangler.toml, and the deployed Worker too when NOTIFY_EDGE_URL and
                        NOTIFY_EDGE_TOKEN are set)
  notify-edge shards grow --to N [--limit L] [--json]
                       (moves each recipient to their shard of N = twice DB_SHARDS D1 databases, L rows a call
                        (default 200), while DB_SHARDS_GROWING_TO=N holds the Worker: docs/scaling.md gives the steps)
environment: NOTIFY_EDGE_URL (default http://127.0.0.1:8787), NOTIFY_EDGE_TOKEN (admin token),
             NOTIFY_EDGE_INGEST_TOKEN (ingest token, for smoke)`

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    json: { type: 'boolean', default: false },
    status: { type: 'string' },
    code: { type: 'string' },
    queue: { type: 'string' },
    source: { type: 'string' },
    kind: { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    limit: { type: 'string' },
    all: { type: 'boolean', default: false },
    filter: { type: 'boolean', default: false },
    max: { type: 'string' },
    'dry-run': { type: 'boolean', default: false },
    reason: { type: 'string' },
    cause: { type: 'string' },
    active: { type: 'string' },
    action: { type: 'string' },
    actor: { type: 'string' },
    target: { type: 'string' },
    reveal: { type: 'boolean', default: false },
    raw: { type: 'boolean', default: false },
    'user-id': { type: 'string' },
    'key-prefix': { type: 'string' },
    to: { type: 'string' },
    timeout: { type: 'string' },
    address: { type: 'string' },
    config: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
})

type Summary = Record<string, unknown>

const out = (text: string) => process.stdout.write(`${text}\n`)
const short = (value: unknown, width = 60) => {
  const text = value === null || value === undefined ? '' : String(value)
  return text.length > width ? `${text.slice(0, width - 1)}…` : text
}

function filters(): Record<string, string> {
  const picked: Record<string, string> = {}
  for (const key of ['status', 'code', 'queue', 'source', 'kind', 'since', 'until'] as const) {
    const value = values[key]
    if (typeof value === 'string') picked[key] = value
  }
  return picked
}

function deadLetterTable(items: Summary[]): string {
  return renderTable(
    ['ID', 'STATUS', 'QUEUE', 'CODE', 'SOURCE', 'EVENT', 'KIND', 'FAILS', 'REPLAYS', 'FIRST SEEN', 'ERROR'],
    items.map((item) => [
      short(item.id, 12),
      item.status,
      item.queue,
      item.code,
      item.source,
      short(item.eventId, 36),
      item.kind,
      item.failures,
      item.replays,
      item.firstSeen,
      short(item.error, 50),
    ]),
  )
}

async function main(): Promise<number> {
  const [area, command, id] = positionals
  if (values.help || !area) {
    out(USAGE)
    return values.help ? 0 : 2
  }
  // Before the client: the doctor reads wrangler.toml without any token.
  if (area === 'doctor') {
    const { output, exitCode } = await doctorCommand(values, process.env)
    out(output)
    return exitCode
  }
  const api = createClient(process.env)

  if (area === 'shards' && command === 'grow') {
    const to = Number(values.to)
    if (!Number.isInteger(to) || to < 2) throw new Error('--to is the new count of D1 shards: twice DB_SHARDS')
    const result = await growShards(api, to, Number(values.limit ?? '200'), values.json ? () => {} : out)
    out(
      values.json
        ? JSON.stringify(result, null, 2)
        : `grown to ${to} shards in ${result.calls} calls; rows copied into the new shards:\n${renderTable(
            ['TABLE', 'ROWS'],
            Object.entries(result.copied).map(([table, n]) => [table, n]),
          )}`,
    )
    return 0
  }

  if (area === 'dlq' && command === 'list') {
    const query = new URLSearchParams({ ...filters(), limit: values.limit ?? '50' })
    const items: Summary[] = []
    let cursor: string | null = null
    do {
      if (cursor) query.set('cursor', cursor)
      const page = (await api.get(`/v1/dead-letters?${query}`)) as { items: Summary[]; nextCursor: string | null }
      items.push(...page.items)
      cursor = values.all ? page.nextCursor : null
      if (!values.all && page.nextCursor && !values.json) out(`(more: --all, or --limit)`)
    } while (cursor)
    out(values.json ? JSON.stringify(items, null, 2) : items.length ? deadLetterTable(items) : 'no dead letters')
    return 0
  }
  if (area === 'dlq' && command === 'show' && id) {
    const letter = (await api.get(`/v1/dead-letters/${encodeURIComponent(id)}`)) as Summary & { history: Summary[] }
    if (values.json) out(JSON.stringify(letter, null, 2))
    else {
      const { body, history, headers, ...fields } = letter
      out(
        renderTable(
          ['FIELD', 'VALUE'],
          Object.entries(fields).map(([key, value]) => [key, short(value, 100)]),
        ),
      )
      out(`\nheaders: ${JSON.stringify(headers)}`)
      out(
        `\nhistory:\n${renderTable(
          ['AT', 'CODE', 'ATTEMPTS', 'ERROR'],
          history.map((h) => [h.at, h.code, h.attempts, short(h.error, 80)]),
        )}`,
      )
      out(`\nbody:\n${JSON.stringify(body, null, 2)}`)
    }
    return 0
  }
  if (area === 'dlq' && command === 'replay') {
    if (values.filter) {
      const dryRun = values['dry-run']
      const max = values.max ? Number(values.max) : 100
      const result = { dryRun, matched: [] as Summary[], replayed: [] as string[], skipped: [] as Summary[] }
      // The API replays one page per call (at most 1000, and a few MB of bodies): follow its cursor up to --max.
      let cursor: string | null = null
      do {
        const page = (await api.post('/v1/dead-letters/replay', {
          ...filters(),
          dryRun,
          max: Math.min(1000, max - result.matched.length),
          ...(cursor ? { cursor } : {}),
        })) as { matched: Summary[]; replayed: string[]; skipped: Summary[]; nextCursor: string | null }
        result.matched.push(...page.matched)
        result.replayed.push(...page.replayed)
        result.skipped.push(...page.skipped)
        cursor = page.nextCursor
      } while (!dryRun && cursor && result.matched.length < max)
      if (values.json) out(JSON.stringify({ ...result, nextCursor: cursor }, null, 2))
      else {
        out(values['dry-run'] ? `dry run: would replay ${result.matched.length}` : `replayed ${result.replayed.length}`)
        if (result.matched.length) out(deadLetterTable(result.matched))
        for (const skipped of result.skipped) out(`skipped ${skipped.id}: ${skipped.reason}`)
      }
      return 0
    }
    if (!id) throw new Error('dlq replay needs a dead-letter id, or --filter')
    const result = await api.post(`/v1/dead-letters/${encodeURIComponent(id)}/replay`, {})
    out(values.json ? JSON.stringify(result, null, 2) : `replayed ${id}`)
    return 0
  }
  if (area === 'dlq' && command === 'discard' && id) {
    if (!values.reason) throw new Error('dlq discard needs --reason "why"')
    const result = await api.post(`/v1/dead-letters/${encodeURIComponent(id)}/discard`, { reason: values.reason })
    out(values.json ? JSON.stringify(result, null, 2) : `discarded ${id}`)
    return 0
  }
  if (area === 'events' && command === 'show' && id) {
    const story = (await api.get(`/v1/events/${encodeURIComponent(id)}`)) as {
      processed: Summary[]
      notifications: Summary[]
      deadLetters: Summary[]
    }
    if (values.json) {
      out(JSON.stringify(story, null, 2))
      return 0
    }
    out(`event ${id}\n`)
    out(
      story.processed.length
        ? renderTable(
            ['OUTCOME', 'TYPE', 'KIND', 'SOURCE', 'ORIGIN', 'RECEIVED', 'PROCESSED', 'IDEMPOTENCY KEY'],
            story.processed.map((p) => [
              p.outcome,
              p.eventType,
              p.kind,
              p.source,
              short(p.origin, 40),
              p.receivedAt,
              p.processedAt,
              p.idempotencyKey,
            ]),
          )
        : 'not processed',
    )
    out('\nnotifications:')
    out(
      story.notifications.length
        ? renderTable(
            ['ID', 'KIND', 'CHANNEL', 'RECIPIENT', 'STATUS', 'DELIVERY', 'SCHEDULED', 'SENT', 'REASON'],
            story.notifications.map((n) => [
              n.id,
              n.kind,
              n.channel,
              n.recipientUserId,
              n.status,
              n.deliveryStatus,
              n.scheduledAt,
              n.sentAt,
              short(n.statusReason, 50),
            ]),
          )
        : 'none',
    )
    out('\ndead letters:')
    out(story.deadLetters.length ? deadLetterTable(story.deadLetters) : 'none')
    return 0
  }
  if (area === 'notifications' && command === 'show' && id) {
    out(await showNotification(api, id, values))
    return 0
  }
  if (area === 'audit' && command === 'list') {
    out(await auditList(api, values))
    return 0
  }
  if (area === 'smoke') {
    if (!values.to) throw new Error('smoke needs --to <address>: an address of yours the sender may mail')
    const ingestToken = process.env.NOTIFY_EDGE_INGEST_TOKEN
    if (!ingestToken) throw new Error("set NOTIFY_EDGE_INGEST_TOKEN to the ingest token (the bridge's SINK_TOKEN)")
    const base = new URL(process.env.NOTIFY_EDGE_URL ?? 'http://127.0.0.1:8787')
    const ingest = createClient({ ...process.env, NOTIFY_EDGE_TOKEN: ingestToken })
    const { code, report } = await smoke({
      to: values.to,
      hopTimeoutMs: Number(values.timeout ?? '60') * 1000,
      ingest: (body) => ingest.post('/v1/ingest', body),
      api,
      local: ['127.0.0.1', 'localhost', '[::1]'].includes(base.hostname),
      print: values.json ? () => {} : out,
    })
    if (values.json) out(JSON.stringify(report, null, 2))
    return code
  }
  if (area === 'erase') {
    out(await eraseCommand(api, values))
    return 0
  }
  if (area === 'cancel') {
    out(await cancelCommand(api, command, values))
    return 0
  }
  if (area === 'suppressions') {
    const answer = await suppressionsCommand(api, command, id, values)
    if (answer !== undefined) {
      out(answer)
      return 0
    }
  }
  out(USAGE)
  return 2
}

main().then(
  (code) => process.exit(code),
  (error: Error) => {
    process.stderr.write(`notify-edge: ${error.message}\n`)
    process.exit(1)
  },
)
