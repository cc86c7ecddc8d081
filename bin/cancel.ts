/**
 * `cancel <key>` and `cancel --filter …`: withdraws what a cancellation key
 * notified and has not gone out (POST /v1/cancellations, …/bulk), and prints
 * what became of each notification — or, with --dry-run, which keys a filter
 * would cancel.
 */
import type { Client } from './client.ts'
import { renderTable } from './table.ts'

/** The options `cancel` reads. */
export type CancelOptions = {
  json: boolean
  filter: boolean
  'dry-run': boolean
  reason?: string
  kind?: string
  'user-id'?: string
  'key-prefix'?: string
  since?: string
  until?: string
}

type Report = {
  key: string
  cancelledAt: string
  source: string
  notifications: {
    id: string
    kind: string
    channel: string
    recipientUserId: string
    status: string
    outcome: string
  }[]
}

type Bulk = {
  dryRun: boolean
  more: boolean
  keys: { key: string; waiting: number; outcomes: Record<string, number> | null }[]
}

/** Runs `cancel`: one key (`key`), or the keys a filter finds. */
export async function cancelCommand(api: Client, key: string | undefined, options: CancelOptions): Promise<string> {
  if (options.filter) return cancelByFilter(api, options)
  if (!key)
    throw new Error(
      'cancel needs a key (cancel <key>) or --filter with at least one of --kind, --user-id, --key-prefix, --since, --until',
    )
  const report = (await api.post('/v1/cancellations', {
    key,
    ...(options.reason ? { reason: options.reason } : {}),
  })) as Report
  if (options.json) return JSON.stringify(report, null, 2)
  const table = renderTable(
    ['NOTIFICATION', 'KIND', 'CHANNEL', 'RECIPIENT', 'STATUS', 'OUTCOME'],
    report.notifications.map((n) => [n.id, n.kind, n.channel, n.recipientUserId, n.status, n.outcome]),
  )
  const head = `cancelled ${report.key} (first at ${report.cancelledAt}, by ${report.source})`
  return report.notifications.length > 0
    ? `${head}\n\n${table}`
    : `${head}; no notification of it yet: an event of it that comes later creates nothing`
}

async function cancelByFilter(api: Client, options: CancelOptions): Promise<string> {
  const filter = {
    ...(options.kind ? { kind: options.kind } : {}),
    ...(options['user-id'] ? { recipientUserId: options['user-id'] } : {}),
    ...(options['key-prefix'] ? { keyPrefix: options['key-prefix'] } : {}),
    ...(options.since ? { createdAfter: options.since } : {}),
    ...(options.until ? { createdBefore: options.until } : {}),
  }
  const answer = (await api.post('/v1/cancellations/bulk', {
    filter,
    dryRun: options['dry-run'],
    ...(options.reason ? { reason: options.reason } : {}),
  })) as Bulk
  if (options.json) return JSON.stringify(answer, null, 2)
  const table = renderTable(
    ['KEY', 'WAITING', 'OUTCOMES'],
    answer.keys.map((entry) => [
      entry.key,
      entry.waiting,
      entry.outcomes === null
        ? '(dry run)'
        : Object.entries(entry.outcomes)
            .map(([outcome, count]) => `${outcome} ${count}`)
            .join(', '),
    ]),
  )
  const head = answer.dryRun
    ? `dry run: ${answer.keys.length} key(s) would be cancelled`
    : `cancelled ${answer.keys.length} key(s)`
  return `${head}${answer.more ? ' (more match: run it again)' : ''}\n\n${table}`
}
