import type { BatchRun } from '../batch.ts'
import { readKvMarks } from '../kv.ts'
import { duplicate } from './decode.ts'

/** Stage 2: the KV fast path — a key marked there was committed to D1 and dispatched. */
export async function knownStage(run: BatchRun): Promise<void> {
  const candidates = run.open().filter((entry) => entry.work)
  const marked = await readKvMarks(
    run.env.IDEMPOTENCY,
    candidates.map((entry) => entry.work?.event.idempotencyKey as string),
    run.log,
  )
  for (const entry of candidates) {
    if (marked.has(entry.work?.event.idempotencyKey as string)) duplicate(run, entry, 'kv')
  }
}
