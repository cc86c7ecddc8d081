import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-plugin'
import { defineConfig } from 'vitest/config'
import { fakeResend } from './test/fake-resend.ts'
import { capture } from './test/log-privacy.ts'

/**
 * What a second shard of notify-events adds to wrangler.toml: its producer and a consumer with
 * notify-events' batch, retry and dead-letter settings (docs/scaling.md shows the blocks for a
 * deployment).
 */
const SECOND_EVENTS_SHARD = {
  queueProducers: { EVENTS_1: { queueName: 'notify-events-1' } },
  queueConsumers: {
    'notify-events-1': {
      maxBatchSize: 100,
      maxBatchTimeout: 0.1,
      maxRetries: 3,
      retryDelay: 5,
      deadLetterQueue: 'notify-dlq',
    },
  },
}

/**
 * What a second D1 shard adds to wrangler.toml: its database, bound as DB_1 (docs/scaling.md). And two
 * more, for test/shard-grow.test.ts to grow one database into two with the Worker's env pointed at them.
 */
const SECOND_DB_SHARD = {
  d1Databases: { DB_1: 'notify-edge-1', GROW_DB: 'notify-edge-grow', GROW_DB_1: 'notify-edge-grow-1' },
}

/**
 * Tests that measure a pace against the wall clock (Resend's sliding second, test/fake-resend.ts): they
 * run alone, after the rest. Beside another workerd on two cores, a paced request can leave later than
 * the pace's guard allows and bunch with the next, which the stand-in then refuses as over the rate.
 */
const ALONE = ['test/send-pace.test.ts']

/** Tests that need the two databases project's bindings, and run only there. */
const ONLY_TWO_DATABASES = ['test/shard-grow.test.ts', 'test/model/sequences-shards.test.ts']

/**
 * The guarantee tests that run again with the recipients spread over two D1 databases (DB_SHARDS=2):
 * the pipeline end to end, from ingest through dispatch to delivery events and the cron, the operator
 * API, and the lifecycle model with its D1 faults landing in either shard. (A test that reads or seeds D1 itself does so through test/shards.ts to
 * run here; the others stay in the one-database project.)
 */
const TWO_DATABASES = [
  'test/db-shards.test.ts',
  'test/inbox-dispatch.test.ts',
  'test/inbox-channel.test.ts',
  'test/channel-policies.test.ts',
  'test/arthunt.test.ts',
  'test/getting-started.test.ts',
  'test/events-consumer.test.ts',
  'test/materialize-stages.test.ts',
  'test/dispatch.test.ts',
  'test/claim-batch.test.ts',
  'test/bundle-send.test.ts',
  'test/transport-pause.test.ts',
  'test/delivery-events.test.ts',
  'test/dead-letters.test.ts',
  'test/maintenance.test.ts',
  'test/retention.test.ts',
  'test/notification-rules.test.ts',
  'test/notification-counts.test.ts',
  'test/processed-marks.test.ts',
  'test/digest-policy.test.ts',
  'test/api.test.ts',
  'test/health.test.ts',
  'test/model/lifecycle.test.ts',
  'test/cancel-shards.test.ts',
  ...ONLY_TWO_DATABASES,
]

/** The tests that run again with notify-events spread over two queues. */
const SHARDED = [
  'test/event-queues.test.ts',
  'test/ingest.test.ts',
  'test/arthunt.test.ts',
  'test/getting-started.test.ts',
  'test/events-consumer.test.ts',
  'test/dead-letters.test.ts',
]

/**
 * The Worker as the tests run it: wrangler.toml's bindings, test secrets, `eventShards` queues for
 * notify-events and `dbShards` D1 databases.
 */
const worker = (eventShards: 1 | 2, dbShards: 1 | 2 = 1) =>
  cloudflareTest(async () => ({
    wrangler: { configPath: './wrangler.toml' },
    miniflare: {
      ...(eventShards === 2 ? SECOND_EVENTS_SHARD : {}),
      ...(dbShards === 2 ? SECOND_DB_SHARD : {}),
      // The only outbound HTTP the Worker makes is to the email provider: a fake of it, in tests only.
      outboundService: fakeResend,
      bindings: {
        // Test-only tokens: the real ones come from `wrangler secret put` or .dev.vars.
        INGEST_TOKEN: 'test-ingest-token-0123456789',
        ADMIN_TOKEN: 'test-admin-token-0123456789',
        UNSUBSCRIBE_SIGNING_KEY: 'test-unsubscribe-signing-key-0123456789',
        RESEND_WEBHOOK_SECRET: 'whsec_dGVzdC1yZXNlbmQtd2ViaG9vay1zZWNyZXQ=',
        CONSOLE_SESSION_KEY: 'test-console-session-key-0123456789abcdef',
        INBOX_TOKEN_SECRET: 'test-inbox-token-secret-0123456789abcdef',
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
        // An escalated email waits ResponseCreated's own 30 minutes, whatever a local .dev.vars says (npm start
        // writes a short wait): test/escalation.test.ts ends each wait itself.
        ESCALATION_AFTER_SECONDS: '1800',
        // Quiet hours hold low urgency alone, as wrangler.toml says, whatever a local .dev.vars says (npm start
        // writes one that holds normal too, for the demo's withdrawn invitation): a test of quiet hours sets its own.
        QUIET_HOURS_URGENCIES: 'low',
        // The suite reads the exact MIME each email went out as (test/helpers.ts, sentMessagesOf), so it
        // keeps it, as a deployment may choose to; test/retention.test.ts runs the default, which keeps none.
        SENT_MESSAGE_RETENTION_DAYS: '7',
        TEST_MIGRATIONS: await readD1Migrations('./migrations/d1'),
        // The lifecycle model (test/model/): `npm run model` sets these for a longer run.
        MODEL_RUNS: process.env.MODEL_RUNS ?? '100',
        MODEL_COMMANDS: process.env.MODEL_COMMANDS ?? '30',
        MODEL_SEED: process.env.MODEL_SEED ?? '',
        MODEL_PATH: process.env.MODEL_PATH ?? '',
        MODEL_REPLAY_PATH: process.env.MODEL_REPLAY_PATH ?? '',
        MODEL_SHRINK: process.env.MODEL_SHRINK ?? 'yes',
        MODEL_TIMEOUT_MS: process.env.MODEL_TIMEOUT_MS ?? '900000',
        EVENTS_QUEUE_SHARDS: String(eventShards),
        DB_SHARDS: String(dbShards),
      },
    },
  }))

// Worker tests run inside workerd with the real local D1, KV and Queues of wrangler.toml.
export default defineConfig({
  test: {
    projects: [
      {
        extends: true,
        plugins: [worker(1)],
        // test/node/ runs in Node against `wrangler dev` (node --test), not inside workerd.
        test: {
          name: 'worker',
          include: ['test/**/*.test.ts'],
          exclude: ['test/node/**', ...ONLY_TWO_DATABASES, ...ALONE],
        },
      },
      {
        extends: true,
        plugins: [worker(1)],
        test: { name: 'alone', include: ALONE, sequence: { groupOrder: 1 }, fileParallelism: false },
      },
      { extends: true, plugins: [worker(2)], test: { name: 'two event queues', include: SHARDED } },
      { extends: true, plugins: [worker(1, 2)], test: { name: 'two databases', include: TWO_DATABASES } },
    ],
    setupFiles: ['./test/setup.ts'],
    globalSetup: ['./test/global-setup.ts'],
    // Every console line, workerd's included, goes to .wrangler/test-console.log (read it when a
    // test fails) instead of the terminal, and is scanned for personal data in global-setup.ts.
    onConsoleLog(log) {
      capture(log)
      return false
    },
    testTimeout: 60_000,
    // Two test files at a time, one workerd each: much of a file's time is waiting on a queue or a timer.
    maxWorkers: 2,
  },
})
