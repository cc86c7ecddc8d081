/**
 * `npm run migrate:pg`: applies migrations/postgres/*.sql to PG_URL (default
 * the local postgres database), in order, each in its own transaction, with
 * PG_SCHEMA and PG_CHANNEL substituted. Every migration is idempotent.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { parseConfig } from './config.ts'
import { createLogger } from './log.ts'

const DIRECTORY = join(import.meta.dirname, '../../migrations/postgres')

/** Applies the outbox migrations to `url`. */
export async function migratePostgres(
  url: string,
  schema = 'data_exchange',
  channel = 'queue_message_log',
): Promise<string[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  const applied: string[] = []
  try {
    for (const file of readdirSync(DIRECTORY)
      .filter((name) => name.endsWith('.sql'))
      .sort()) {
      const text = readFileSync(join(DIRECTORY, file), 'utf8')
        .replaceAll('data_exchange', schema)
        .replaceAll("'queue_message_log'", `'${channel}'`)
      await sql.begin((tx) => tx.unsafe(text))
      applied.push(file)
    }
  } finally {
    await sql.end({ timeout: 1 })
  }
  return applied
}

if (import.meta.main) {
  const config = parseConfig({ PG_URL: 'postgres://postgres@127.0.0.1:5432/postgres', ...process.env })
  const applied = await migratePostgres(config.PG_URL as string, config.PG_SCHEMA, config.PG_CHANNEL)
  createLogger(config.LOG_LEVEL).info('migrate.applied', {
    migrations: applied,
    // Without its credentials.
    database: (config.PG_URL as string).replace(/\/\/[^@]*@/, '//'),
  })
}
