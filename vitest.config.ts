import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-plugin'
import { defineConfig } from 'vitest/config'
import { fakeResend } from './test/fake-resend.ts'
import { capture } from './test/log-privacy.ts'

// Worker tests run inside workerd with the real local D1, KV and Queues of wrangler.toml.
export default defineConfig({
  plugins: [
    cloudflareTest(async () => ({
      wrangler: { configPath: './wrangler.toml' },
      miniflare: {
        // The only outbound HTTP the Worker makes is to the email provider: a fake of it, in tests only.
        outboundService: fakeResend,
        bindings: {
          // Test-only tokens: the real ones come from `wrangler secret put` or .dev.vars.
          INGEST_TOKEN: 'test-ingest-token-0123456789',
          ADMIN_TOKEN: 'test-admin-token-0123456789',
          UNSUBSCRIBE_SIGNING_KEY: 'test-unsubscribe-signing-key-0123456789',
          RESEND_WEBHOOK_SECRET: 'whsec_dGVzdC1yZXNlbmQtd2ViaG9vay1zZWNyZXQ=',
          CONSOLE_SESSION_KEY: 'test-console-session-key-0123456789abcdef',
          // Set here so that a local .dev.vars (npm start writes one) cannot lend its example token, which
          // the configuration refuses with a PUBLIC_URL off this machine. No test signs in with it: a
          // test of the viewer sets its own.
          VIEWER_TOKEN: 'vitest-viewer-token-nobody-uses-0123456789',
          // The deployed form of the links, whatever a local .dev.vars (npm start) says.
          PUBLIC_URL: 'https://notify-edge.example.workers.dev',
          // The tests' shared Resend team has a raised limit (test/fake-resend.ts), and the Worker is
          // told so; tests of the send pace use teams at Resend's default and say their own rate.
          RESEND_REQUESTS_PER_SECOND: '500',
          // Digests close a second after they open, so that a test waits for a response's email as for
          // any other; test/digest.test.ts closes its own digests and sets a long window.
          DIGEST_WINDOW_SECONDS: '1',
          // The suite reads the exact MIME each email went out as (test/helpers.ts, sentMessagesOf), so it
          // keeps it, as a deployment may choose to; test/retention.test.ts runs the default, which keeps none.
          SENT_MESSAGE_RETENTION_DAYS: '7',
          TEST_MIGRATIONS: await readD1Migrations('./migrations/d1'),
          // The lifecycle model (test/model/): `npm run model` sets these for a longer run.
          MODEL_RUNS: process.env.MODEL_RUNS ?? '100',
          MODEL_COMMANDS: process.env.MODEL_COMMANDS ?? '30',
          MODEL_SEED: process.env.MODEL_SEED ?? '',
          MODEL_PATH: process.env.MODEL_PATH ?? '',
          MODEL_SHRINK: process.env.MODEL_SHRINK ?? 'yes',
          MODEL_TIMEOUT_MS: process.env.MODEL_TIMEOUT_MS ?? '900000',
        },
      },
    })),
  ],
  test: {
    include: ['test/**/*.test.ts'],
    // test/node/ runs in Node against `wrangler dev` (node --test), not inside workerd.
    exclude: ['test/node/**'],
    setupFiles: ['./test/setup.ts'],
    globalSetup: ['./test/global-setup.ts'],
    // Every console line, workerd's included, goes to .wrangler/test-console.log (read it when a
    // test fails) instead of the terminal, and is scanned for personal data in global-setup.ts.
    onConsoleLog(log) {
      capture(log)
      return false
    },
    testTimeout: 60_000,
  },
})
