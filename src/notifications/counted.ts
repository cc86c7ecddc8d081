/**
 * `notify_notifications_total{channel, kind, status}` counted a batch at a
 * time on the hot path, where a trigger wrote a counter row for every
 * notification written and every status it reached (D1 bills each row
 * written: three of an email's eighteen were these).
 *
 * A statement on the hot path — the insert of a planned notification, the
 * claim, the `sent` mark — writes a fresh random `count_mark` on each row it
 * changes, and the triggers of migration 0021 leave those rows alone; every
 * other write leaves `count_mark` as it was, and the triggers count it as
 * before. In the same transaction, after the hot statements, one statement
 * (`countChanges`) adds up the rows that carry the marks they wrote — the
 * rows they changed, and no others: a redelivered insert that met its row
 * (`ON CONFLICT DO NOTHING`), a claim that found the row taken, a mark whose
 * lease was lost wrote no mark and count nothing. So the counter stays
 * exactly what the trigger kept, for a row written per label set and batch
 * instead of one per change.
 */

/** A row a hot statement may change, with the mark it writes and the status it counts the change under. */
export type CountedChange = { id: string; mark: number; status: string }

/**
 * A new mark: 48 random bits, so that a row that already carries one (from
 * an earlier hot statement) is never taken for one this statement changed.
 */
export function newCountMark(): number {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2)) as unknown as [number, number]
  return (high & 0xffff) * 2 ** 32 + low
}

/**
 * The statement that counts the rows of `changes` that carry their mark, by
 * channel, kind and the status each change names — as the triggers label
 * them; a change named twice (two messages of one notification in a claim)
 * counts once. A row carries one mark, so of two changes of one row under
 * different marks only the one whose mark it kept can count. Nothing when
 * there is nothing to count. Reads one row per change (by primary key) and
 * writes one counter row per label set.
 */
export function countChanges(db: D1Database, changes: readonly CountedChange[]): D1PreparedStatement[] {
  if (changes.length === 0) return []
  const once = new Map<string, CountedChange>()
  for (const change of changes) {
    const key = `${change.id}\n${change.mark}`
    if (!once.has(key)) once.set(key, change)
  }
  return [
    db
      .prepare(
        `INSERT INTO counters (name, labels, value)
         SELECT 'notify_notifications_total',
                json_object('channel', n.channel, 'kind', n.kind, 'status', json_extract(c.value, '$[2]')), count(*)
         FROM json_each(?1) c JOIN notifications n ON n.id = json_extract(c.value, '$[0]')
         WHERE n.count_mark = json_extract(c.value, '$[1]')
         GROUP BY n.channel, n.kind, json_extract(c.value, '$[2]')
         ON CONFLICT (name, labels) DO UPDATE SET value = value + excluded.value`,
      )
      .bind(JSON.stringify([...once.values()].map(({ id, mark, status }) => [id, mark, status]))),
  ]
}
