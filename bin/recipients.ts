/**
 * The recipient side in the command line: a notification with its delivery
 * timeline, the suppression list, and a recipient's erasure.
 */
import type { Client } from './client.ts'
import { renderTable } from './table.ts'

type Summary = Record<string, unknown>

/** The options of the command line these commands read. */
export type RecipientOptions = {
  json: boolean
  reason?: string | undefined
  until?: string | undefined
  cause?: string | undefined
  source?: string | undefined
  active?: string | undefined
  limit?: string | undefined
  all: boolean
  reveal?: boolean | undefined
  raw?: boolean | undefined
  'user-id'?: string | undefined
  address?: string | undefined
}

const text = (value: unknown) => (value === null || value === undefined ? '' : String(value))

/**
 * `notifications show <id> [--reveal] [--raw]`: status, delivery status and the
 * provider's timeline, with the recipient masked and no content. `--reveal`
 * shows the address, the name and the content; `--raw` prints the message as
 * it was sent (to redirect into an .eml file). Both are reads the Worker
 * records in the audit trail, as made through the CLI.
 */
export async function showNotification(api: Client, id: string, options: RecipientOptions): Promise<string> {
  const query = options.raw ? '?raw=true' : options.reveal ? '?reveal=true' : ''
  const notification = (await api.get(`/v1/notifications/${encodeURIComponent(id)}${query}`)) as Summary & {
    timeline: Summary[]
    sentMessage: { raw?: string } | null
  }
  if (options.json) return JSON.stringify(notification, null, 2)
  if (options.raw) {
    if (notification.sentMessage?.raw === undefined)
      throw new Error(
        `notification ${id} has no exact message kept: not sent, past SENT_MESSAGE_RETENTION_DAYS, or sent where it is 0 (the default)`,
      )
    return notification.sentMessage.raw
  }
  const fields = ['id', 'eventId', 'kind', 'channel', 'recipientUserId', 'recipientEmail', 'recipientName', 'status']
  const more = ['statusReason', 'errorCode', 'deliveryStatus', 'deliveryAt', 'scheduledAt', 'sentAt', 'providerId']
  const content = options.reveal ? ['subject'] : []
  const table = renderTable(
    ['FIELD', 'VALUE'],
    [...fields, ...more, ...content].map((key) => [key, text(notification[key])]),
  )
  const timeline = notification.timeline.length
    ? renderTable(
        ['AT', 'PROVIDER', 'STATUS', 'TYPE'],
        notification.timeline.map((entry) => [entry.occurredAt, entry.provider, entry.status, entry.type]),
      )
    : 'no provider events yet'
  const hint = options.reveal ? '' : '\n\n(address and name masked; --reveal shows them and the subject, audited)'
  return `${table}\n\ndelivery timeline:\n${timeline}${hint}`
}

function suppressionTable(items: Summary[]): string {
  return renderTable(
    ['ADDRESS', 'CAUSE', 'ACTIVE', 'UNTIL', 'SOURCE', 'SINCE', 'REASON'],
    items.map((item) => [
      item.address,
      item.cause,
      item.active ? 'yes' : 'no',
      text(item.until) || 'until removed',
      item.source,
      item.createdAt,
      text(item.reason).slice(0, 60),
    ]),
  )
}

/** `suppressions list|show|add|remove`. */
export async function suppressionsCommand(
  api: Client,
  command: string | undefined,
  address: string | undefined,
  options: RecipientOptions,
): Promise<string | undefined> {
  const path = (value: string) => `/v1/suppressions/${encodeURIComponent(value)}`
  if (command === 'list') {
    const items: Summary[] = []
    let cursor: string | null = null
    do {
      const query = new URLSearchParams({ limit: options.limit ?? '50' })
      for (const key of ['cause', 'source', 'active'] as const) if (options[key]) query.set(key, options[key] as string)
      if (cursor) query.set('cursor', cursor)
      const page = (await api.get(`/v1/suppressions?${query}`)) as { items: Summary[]; nextCursor: string | null }
      items.push(...page.items)
      cursor = options.all ? page.nextCursor : null
    } while (cursor)
    if (options.json) return JSON.stringify(items, null, 2)
    return items.length ? suppressionTable(items) : 'no suppressed addresses'
  }
  if (!address) return undefined
  if (command === 'show') {
    const entry = (await api.get(path(address))) as Summary
    return options.json ? JSON.stringify(entry, null, 2) : suppressionTable([entry])
  }
  if (command === 'add') {
    if (!options.reason) throw new Error('suppressions add needs --reason "why"')
    const body = { reason: options.reason, ...(options.until ? { until: options.until } : {}) }
    const entry = (await api.put(path(address), body)) as Summary
    return options.json ? JSON.stringify(entry, null, 2) : `suppressed ${entry.address}`
  }
  if (command === 'remove') {
    await api.delete(path(address))
    return options.json ? JSON.stringify({ removed: address }) : `removed ${address}`
  }
  return undefined
}

/**
 * `erase --user-id <id>` or `erase --address <address>`: erases the recipient
 * from every table (POST /v1/erasures) and prints the rows erased per table
 * and how the audit trail names them — never the address.
 */
export async function eraseCommand(api: Client, options: RecipientOptions): Promise<string> {
  const userId = options['user-id']
  const { address } = options
  if ((userId === undefined) === (address === undefined))
    throw new Error('erase needs --user-id <id> or --address <address>')
  const result = (await api.post('/v1/erasures', userId !== undefined ? { userId } : { address })) as {
    target: string
    erased: Record<string, number>
  }
  if (options.json) return JSON.stringify(result, null, 2)
  const table = renderTable(
    ['TABLE', 'ROWS'],
    Object.entries(result.erased).map(([name, count]) => [name, count]),
  )
  return `erased; the audit trail names the recipient ${result.target}\n\n${table}`
}
