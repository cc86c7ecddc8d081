import postgres from 'postgres'
import { migratePostgres } from '../bridge/src/migrate.ts'

/** The local PostgreSQL the tests use (trust auth). */
export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/** A database of its own, with the outbox migration applied; `drop()` removes it. */
export async function freshDatabase() {
  const name = `notify_edge_bridge_${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} })
  await admin.unsafe(`CREATE DATABASE ${name}`)
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`)
  await migratePostgres(url)
  const sql = postgres(url, { max: 4, onnotice: () => {} })
  return {
    url,
    sql,
    async drop() {
      await sql.end({ timeout: 1 })
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.end({ timeout: 1 })
    },
  }
}

/** Writes outbox rows as a producer would: log row and data row in one transaction. */
export async function writeRows(sql: postgres.Sql, count: number, writers = 1): Promise<string[]> {
  const ids: string[] = []
  await Promise.all(
    Array.from({ length: writers }, async (_, writer) => {
      for (let index = writer; index < count; index += writers) {
        const id = crypto.randomUUID()
        ids.push(id)
        const body = Buffer.from(JSON.stringify({ envelope: { eventId: id, eventType: 'response.created' }, n: index }))
        await sql.begin(async (tx) => {
          await tx`INSERT INTO data_exchange.message_queue_log (message_id) VALUES (${id})`
          await tx`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body) VALUES (${id}, ${body})`
        })
      }
    }),
  )
  return ids
}

export async function transferredCount(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<{ count: string }[]>`SELECT count(*) FROM data_exchange.message_queue_log WHERE transferred`
  return Number(row?.count)
}
