/**
 * What the Worker's pipeline costs per email in D1, KV and queue operations,
 * summed from its `invocation.cost` log lines (src/metrics/invocation.ts): one
 * per ingest request and per consumer batch, each counted by metered bindings
 * from what the platform answered (D1's `meta.rows_read` / `rows_written`).
 */

import { logicalQueueOf } from '../src/queue/names.ts'

/** The fields of one `invocation.cost` line that are summed. */
const FIELDS = [
  'd1RoundTrips',
  'd1Statements',
  'd1RowsRead',
  'd1RowsWritten',
  'd1Ms',
  'kvReads',
  'kvWrites',
  'queueWrites',
  'queueReads',
  'queueDeletes',
] as const

type Field = (typeof FIELDS)[number]
type Line = Record<Field, number> & { handler: string }

/** The handlers an email goes through: ingest, then the two consumers. */
const PIPELINE = new Set(['ingest', 'notify-events', 'notify-dispatch'])

/** The handlers of what the provider reports of an email: its webhook and the delivery-event consumer. */
export const DELIVERY_PATH = new Set(['webhook', 'notify-email-events'])

/** Every `invocation.cost` line of the `handlers` (the pipeline's by default) in `output`. */
export function costLines(output: string, handlers: ReadonlySet<string> = PIPELINE): Line[] {
  const lines: Line[] = []
  for (const text of output.split('\n')) {
    if (!text.includes('"event":"invocation.cost"')) continue
    // Wrangler may decorate a line (a warning's marker before it, colours after it).
    const line = JSON.parse(text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1)) as Line
    // Every shard of notify-events (notify-events-1, …) is notify-events' work.
    line.handler = logicalQueueOf(line.handler)
    if (handlers.has(line.handler)) lines.push(line)
  }
  return lines
}

/** Messages the `handler` consumer has read, as its lines say: the bench waits until every email's are there. */
export function messagesRead(lines: readonly Line[], handler: string): number {
  return lines.filter((line) => line.handler === handler).reduce((sum, line) => sum + line.queueReads, 0)
}

/** Per email (or per event: `count` of them), what these lines cost together, in the keys bench/results.json reports. */
export function costPer(lines: readonly Line[], count: number): Record<string, number> {
  const total = Object.fromEntries(
    FIELDS.map((field) => [field, lines.reduce((sum, line) => sum + line[field], 0)]),
  ) as Record<Field, number>
  const per = (value: number) => Math.round((value / count) * 100) / 100
  return {
    d1_statements: per(total.d1Statements),
    d1_round_trips: per(total.d1RoundTrips),
    d1_rows_read: per(total.d1RowsRead),
    d1_rows_written: per(total.d1RowsWritten),
    d1_ms: per(total.d1Ms),
    kv_reads: per(total.kvReads),
    kv_writes: per(total.kvWrites),
    queue_operations: per(total.queueWrites + total.queueReads + total.queueDeletes),
  }
}
