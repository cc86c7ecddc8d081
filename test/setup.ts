import { applyD1Migrations } from 'cloudflare:test'
import { env } from 'cloudflare:workers'

// The same migrations `npm run dev` applies, so the tests run against the real schema.
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS)
