import { configOf } from '../config.ts'
import { dispatchFor } from '../dispatch/message.ts'
import { takeProbe } from '../dispatch/pause.ts'
import type { Logger } from '../log.ts'
import { releaseProbe } from '../notifications/pause.ts'
import { markEnqueued, selectStuckNotifications } from '../notifications/stuck.ts'
import { sendAll } from '../queue/send.ts'
import { runRetention } from './retention.ts'

/** Stuck notifications re-enqueued per run; the next run takes the rest. */
const STUCK_BATCH = 1000

/**
 * The cron trigger's work. The notification row is the outbox of the dispatch
 * queue: whatever dispatch message was lost (a crash between commit and send,
 * local queue contents dropped on restart, a sender that died holding a lease)
 * is sent again here, and dispatch's claim makes that safe. A paused
 * transport gets its next probe. Then retention: a bounded chunk of each kind
 * of data past its retention (./retention.ts). A failure is thrown so the run
 * shows as failed; the next one tries again.
 */
export async function runMaintenance(env: Env, now: Date, log: Logger): Promise<void> {
  await probePausedTransport(env, now, log)
  await reEnqueueStuck(env, now, log)
  await runRetention(env, configOf(env), now, log)
}

async function reEnqueueStuck(env: Env, now: Date, log: Logger): Promise<void> {
  const config = configOf(env)
  const nowIso = now.toISOString()
  const cutoff = new Date(now.getTime() - config.STUCK_GRACE_SECONDS * 1000).toISOString()
  const { results: stuck } = await selectStuckNotifications(env.DB, nowIso, cutoff, STUCK_BATCH).all<{
    id: string
    scheduled_at: string
  }>()
  if (stuck.length === 0) return
  await sendAll(
    env.DISPATCH,
    stuck.map((row) => dispatchFor(row.id, row.scheduled_at, now)),
  )
  await markEnqueued(
    env.DB,
    stuck.map((row) => row.id),
    nowIso,
  ).run()
  log.warn('maintenance.re-enqueued', { count: stuck.length })
}

/**
 * When the configured transport is paused and its next probe is due, one of
 * its waiting notifications is released and enqueued: the claim lets only
 * that one through. Its slot is held for two leases, so a probe that never
 * reports back is replaced, never joined by a second one.
 */
async function probePausedTransport(env: Env, now: Date, log: Logger): Promise<void> {
  const config = configOf(env)
  const transport = config.EMAIL_TRANSPORT
  const nowIso = now.toISOString()
  const holdUntil = new Date(now.getTime() + 2 * config.DISPATCH_LEASE_SECONDS * 1000).toISOString()
  const [taken, released] = await env.DB.batch<{ id: string; scheduled_at: string; probe_id: string | null }>([
    takeProbe(env.DB, transport, nowIso, holdUntil),
    releaseProbe(env.DB, transport, nowIso),
  ])
  const probe = released?.results[0]
  if (!taken?.results[0] || !probe) return
  await sendAll(env.DISPATCH, [dispatchFor(probe.id, probe.scheduled_at, now)])
  log.warn('transport.probe', { transport, notificationId: probe.id })
}
