import { applyD1Migrations } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { shardDbs } from './shards.ts'

// The same migrations `npm run dev` applies, so the tests run against the real schema: in every D1 shard.
for (const db of shardDbs()) await applyD1Migrations(db, env.TEST_MIGRATIONS)
