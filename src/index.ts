import { app } from './api/app.ts'
import { configOf } from './config.ts'
import { connectApi } from './console/api.ts'
import { consoleApp } from './console/app.tsx'
import { consumeDeadLetters } from './dead-letters/dlq-consumer.ts'
import { consumeEmailEvents } from './delivery/email-events-consumer.ts'
import { consumeDispatch } from './dispatch/dispatch-consumer.ts'
import { loggerFor } from './log.ts'
import { runMaintenance } from './maintenance/cron.ts'
import { consumeEvents } from './materialize/events-consumer.ts'
import { logCost, meterEnv } from './metrics/invocation.ts'
import { meteredBatch } from './metrics/metered-bindings.ts'
import { isEventsQueue, QUEUES } from './queue/names.ts'
import { FALLBACK_DELAY_SECONDS } from './queue/policy.ts'

/**
 * How long a batch that arrives while the shards grow waits before it is delivered again: each retry
 * spends an attempt (notify-events has 3 before its dead letter, notify-dlq 100 before a message is
 * dropped), so an hour, where a grow takes about that long.
 */
const HELD_DELAY_SECONDS = 3600

// The send pace of each provider account (the SEND_PACE binding): a Durable Object class must be
// exported by the Worker that declares it.
export { SendPace } from './dispatch/pace/send-pace.ts'
// Each recipient's in-app feed (the INBOX binding).
export { InboxFeed } from './inbox/inbox-feed.ts'

// The console's pages sit beside the API and call it in-process (no import cycle: the API does
// not know the console).
app.route('/console', consoleApp)
connectApi(async (request, env, ctx) => app.fetch(request, env, ctx))

/**
 * The pipeline's ways in, by the handler name their cost is logged under: their
 * requests are metered like the queue consumers (`invocation.cost`). The
 * provider's webhook is part of what an email costs, as its delivery events are.
 */
const METERED_PATHS = new Map([
  ['/v1/ingest', 'ingest'],
  ['/v1/webhooks/resend', 'webhook'],
])

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    // Only the pipeline's ways in are part of an email's cost; the operator API's reads are not metered.
    const handler = METERED_PATHS.get(new URL(request.url).pathname)
    if (handler === undefined) return app.fetch(request, env, ctx)
    const metered = meterEnv(env)
    try {
      return await app.fetch(request, metered.env, ctx)
    } finally {
      logCost(loggerFor(env), handler, metered.cost)
    }
  },

  /**
   * Routes each batch to its consumer. Never throws: a consumer settles every
   * message itself; if one fails before doing so (a bug, bad configuration),
   * the batch is retried and nothing is lost. Local Queues would otherwise
   * redeliver even acked messages of a batch whose handler threw.
   */
  async queue(delivered, unmetered): Promise<void> {
    const log = loggerFor(unmetered)
    const { env, cost } = meterEnv(unmetered)
    const batch = meteredBatch(delivered, cost)
    try {
      // While the D1 shards grow, nothing but the grow writes D1 (src/shards/grow.ts): a batch that arrives
      // (the queues' delivery should be paused) waits, at the cost of an attempt, rather than write a row
      // where the new count will not look for it.
      const { DB_SHARDS_GROWING_TO: growingTo } = configOf(unmetered)
      if (growingTo > 0) {
        log.warn('queue.held', { queue: batch.queue, count: batch.messages.length, growingTo })
        return batch.retryAll({ delaySeconds: HELD_DELAY_SECONDS })
      }
      if (isEventsQueue(batch.queue)) return await consumeEvents(batch, env, log)
      switch (batch.queue) {
        case QUEUES.dispatch:
          return await consumeDispatch(batch, env, log)
        case QUEUES.emailEvents:
          return await consumeEmailEvents(batch, env, log)
        case QUEUES.deadLetters:
          return await consumeDeadLetters(batch, env, log)
        default:
          log.error('queue.unknown', { queue: batch.queue, count: batch.messages.length, code: 'NTF_UNKNOWN_QUEUE' })
          batch.retryAll({ delaySeconds: FALLBACK_DELAY_SECONDS })
      }
    } catch (error) {
      log.error('queue.batch-failed', { queue: batch.queue, count: batch.messages.length, error })
      batch.retryAll({ delaySeconds: FALLBACK_DELAY_SECONDS })
    } finally {
      logCost(log, batch.queue, cost)
    }
  },

  /** The maintenance cron, metered as `cron`: retention's deletes are writes an email costs too. */
  async scheduled(controller, unmetered): Promise<void> {
    const log = loggerFor(unmetered)
    const { env, cost } = meterEnv(unmetered)
    try {
      await runMaintenance(env, new Date(controller.scheduledTime), log)
    } finally {
      logCost(log, 'cron', cost)
    }
  },
} satisfies ExportedHandler<Env>
