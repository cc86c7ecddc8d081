/**
 * Writing a queue batch's items to D1 together, each item failing alone. Its
 * users are three consumers of three folders (materialize, delivery, dead
 * letters), so it belongs to none of them: it sits at the top level beside
 * src/sql.ts, with the other D1 code every stage shares.
 */

/**
 * The statements of one item (an event, a delivery event, a dead letter): the
 * one whose change says "this batch won" first. `alone`: what the item adds
 * when it is written on its own — what the batch's shared statements would
 * have done for it, now done in its own transaction.
 */
export type EventWrite<T> = { item: T; statements: D1PreparedStatement[]; alone?: D1PreparedStatement[] }

/**
 * How one item's write ended: committed — whether its first statement changed
 * a row, and how many rows each of its statements changed — or failed.
 */
export type WriteResult = { committed: true; won: boolean; changes: number[] } | { committed: false; cause: unknown }

/**
 * Writes a batch's events in one D1 batch (one transaction, one round trip).
 * When that fails, each event is written again in a batch of its own, so one
 * event whose statement always fails (a constraint, a trigger, a bad value)
 * fails alone instead of dragging the other 99 into retries and dead letters;
 * `shared` (counters and gauges of the whole batch) are then written on their
 * own. `together` is written only with the whole batch: what each item's
 * `alone` writes in its place when they are written one by one. A D1 outage
 * fails them all, as before.
 *
 * @returns each event's result, and the error of the shared statements if they failed
 */
export async function persistEvents<T>(
  db: D1Database,
  writes: readonly EventWrite<T>[],
  shared: readonly D1PreparedStatement[],
  together: readonly D1PreparedStatement[] = [],
): Promise<{ results: Map<T, WriteResult>; sharedError?: unknown }> {
  const results = new Map<T, WriteResult>()
  const all = [...writes.flatMap((write) => write.statements), ...together, ...shared]
  if (all.length === 0) return { results }
  try {
    const answers = await db.batch(all)
    let offset = 0
    for (const write of writes) {
      results.set(write.item, committed(answers.slice(offset, offset + write.statements.length)))
      offset += write.statements.length
    }
    return { results }
  } catch {
    // Which event broke the batch is not known: each one on its own.
  }
  await Promise.all(
    writes.map(async (write) => {
      try {
        results.set(write.item, committed(await db.batch([...write.statements, ...(write.alone ?? [])])))
      } catch (cause) {
        results.set(write.item, { committed: false, cause })
      }
    }),
  )
  if (shared.length === 0) return { results }
  try {
    await db.batch([...shared])
    return { results }
  } catch (sharedError) {
    return { results, sharedError }
  }
}

function committed(answers: readonly D1Result[]): WriteResult {
  const changes = answers.map((answer) => answer.meta.changes ?? 0)
  return { committed: true, won: (changes[0] ?? 0) > 0, changes }
}
