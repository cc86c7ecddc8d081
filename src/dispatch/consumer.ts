import { configOf } from '../config.ts'
import { describeIssues, toFieldIssues } from '../contracts/index.ts'
import { PipelineError } from '../errors.ts'
import type { Logger } from '../log.ts'
import { type Settlement, settleFailure } from '../queue/policy.ts'
import { type Outgoing, sendAll } from '../queue/send.ts'
import { settleBatch } from '../queue/settle.ts'
import {
  type ClaimedRow,
  claimNotification,
  notificationState,
  supersedeFallback,
  suppressAuthoritative,
} from './claim.ts'
import { DispatchLease } from './lease.ts'
import { DispatchMessageSchema, dispatchFor } from './message.ts'
import { type SendContext, sendAndRecord } from './send.ts'
import { transportFor } from './transports/index.ts'

/** Sends in flight at once from one batch. */
const SEND_CONCURRENCY = 6

type Claim = { message: Message<unknown>; id: string; statement: number }

/**
 * Consumer of `notify-dispatch` (DESIGN §4–5): claim each notification
 * (`pending → sending` under this batch's claim token and lease; one winner),
 * settle verification decisions that arrived from both sources, send through
 * the configured transport, and record each result as its send finishes —
 * claims in one D1 batch, then one small batch per result. The lease is
 * renewed while sends run, and every mark applies only under the token that
 * claimed, so a send slower than the lease is never sent a second time by a
 * delivery that took over, and never has its outcome overwritten. Status
 * counters follow the rows by trigger (migration 0004). Transient send
 * failures follow DISPATCH_RETRY_DELAYS_SECONDS, then dead-letter; permanent
 * ones end the notification `failed` without a retry.
 */
export async function consumeDispatch(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const config = configOf(env)
  const now = new Date()
  const nowIso = now.toISOString()
  const lease = new DispatchLease(env.DB, config.DISPATCH_LEASE_SECONDS, log, now.getTime())
  const settlements = new Map<Message<unknown>, Settlement>()
  const fail = (message: Message<unknown>, error: unknown) =>
    settlements.set(message, settleFailure(error, message.attempts, config.DISPATCH_RETRY_DELAYS_SECONDS))

  // 1. Claim everything in one D1 batch: supersede / suppress / claim / read state, per message.
  const claims: Claim[] = []
  const statements: D1PreparedStatement[] = []
  for (const message of batch.messages) {
    const parsed = DispatchMessageSchema.safeParse(message.body)
    if (!parsed.success) {
      const error = `not a dispatch message: ${describeIssues(toFieldIssues(parsed.error))}`
      settlements.set(message, { action: 'dead-letter', code: 'NTF_INVALID_PAYLOAD', error })
      continue
    }
    const id = parsed.data.notificationId
    claims.push({ message, id, statement: statements.length })
    statements.push(
      supersedeFallback(env.DB, id, nowIso, config.DECISION_MATCH_SECONDS),
      suppressAuthoritative(env.DB, id, nowIso, config.DECISION_MATCH_SECONDS),
      claimNotification(env.DB, id, nowIso, lease.until, lease.token),
      notificationState(env.DB, id),
    )
  }
  let results: D1Result[] = []
  if (statements.length > 0) {
    try {
      results = await env.DB.batch(statements)
    } catch (cause) {
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 claim: ${(cause as Error).message}`, { cause })
      for (const claim of claims) fail(claim.message, error)
      claims.length = 0
    }
  }

  // 2. Sort out what was claimed, ended, or is not due yet.
  const toSend: { message: Message<unknown>; row: ClaimedRow }[] = []
  const later: { message: Message<unknown>; outgoing: Outgoing }[] = []
  for (const { message, id, statement } of claims) {
    const [superseded, suppressed, claimed, state] = [0, 1, 2, 3].map((offset) => first(results[statement + offset]))
    if (superseded || suppressed) {
      const ended = (superseded ?? suppressed) as { kind: string; channel: string }
      const status = superseded ? 'superseded' : 'suppressed'
      settlements.set(message, { action: 'ack' })
      log.info(`dispatch.${status}`, { notificationId: id, kind: ended.kind })
    } else if (claimed) {
      toSend.push({ message, row: claimed as ClaimedRow })
    } else if (!state) {
      settlements.set(message, { action: 'ack' })
      log.warn('dispatch.not-found', { notificationId: id })
    } else if (state.status === 'pending' && String(state.scheduled_at) > nowIso) {
      // Not due yet (a delay longer than Queues allow, or an early redelivery): come back when it is.
      later.push({ message, outgoing: dispatchFor(id, String(state.scheduled_at), now) })
    } else {
      // Already final, or another delivery holds a live lease (the cron takes over if it dies).
      settlements.set(message, { action: 'ack' })
      log.info('dispatch.skipped', { notificationId: id, status: state.status })
    }
  }

  // 3. Send, a few at a time, each result recorded as its send finishes, under a renewed lease.
  const sending: SendContext = { env, config, log, lease, transport: transportFor(env, config) }
  const queue = [...toSend]
  lease.start()
  try {
    await Promise.all(
      Array.from({ length: Math.min(SEND_CONCURRENCY, queue.length) }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) {
          settlements.set(next.message, await sendAndRecord(sending, next.message, next.row))
        }
      }),
    )
  } finally {
    lease.stop()
  }

  // 4. Notifications that are not due yet go back on the queue with their delay.
  if (later.length > 0) {
    try {
      await sendAll(
        env.DISPATCH,
        later.map((entry) => entry.outgoing),
      )
      for (const { message } of later) settlements.set(message, { action: 'ack' })
    } catch (cause) {
      const error = new PipelineError('NTF_DEPENDENCY_FAILED', `notify-dispatch: ${(cause as Error).message}`, {
        cause,
      })
      for (const { message } of later) fail(message, error)
    }
  }

  await settleBatch(batch, settlements, {
    dlq: env.DLQ,
    log,
    fallbackDelaySeconds: 30,
  })
}

function first(result: D1Result | undefined): Record<string, unknown> | undefined {
  return (result?.results?.[0] as Record<string, unknown> | undefined) ?? undefined
}
