import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-plugin'
import { defineConfig } from 'vitest/config'

// Worker tests run inside workerd with the real local D1, KV and Queues of wrangler.toml.
export default defineConfig({
  plugins: [
    cloudflareTest(async () => ({
      wrangler: { configPath: './wrangler.toml' },
      miniflare: {
        bindings: {
          // Test-only tokens: the real ones come from `wrangler secret put` or .dev.vars.
          INGEST_TOKEN: 'test-ingest-token-0123456789',
          ADMIN_TOKEN: 'test-admin-token-0123456789',
          TEST_MIGRATIONS: await readD1Migrations('./migrations/d1'),
        },
      },
    })),
  ],
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['./test/setup.ts'],
    silent: 'passed-only',
    testTimeout: 60_000,
  },
})
