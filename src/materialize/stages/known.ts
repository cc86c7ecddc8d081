import { readKvMarks } from '../kv.ts'
import type { EventsRun } from '../run.ts'
import { type Decoded, duplicate } from './decode.ts'

/** What KV does not know as processed, in batch order: the valid events it has no mark for, and every ignored one. */
export type Known = Decoded

/** Stage 2: the KV fast path — a key marked there was committed to D1 and dispatched. */
export async function knownStage(run: EventsRun, decoded: readonly Decoded[]): Promise<Known[]> {
  const keys = decoded.flatMap((item) => (item.type === 'valid' ? [item.work.event.idempotencyKey] : []))
  const marked = await readKvMarks(run.env.IDEMPOTENCY, keys, run.log)
  return decoded.filter((item) => {
    if (item.type !== 'valid' || !marked.has(item.work.event.idempotencyKey)) return true
    duplicate(run, item, 'kv')
    return false
  })
}
