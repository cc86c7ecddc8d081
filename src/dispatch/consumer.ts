import { configOf } from '../config.ts'
import { describeIssues, toFieldIssues } from '../contracts/index.ts'
import { PipelineError } from '../errors.ts'
import type { Logger } from '../log.ts'
import { describeError, type Settlement, settleFailure } from '../queue/policy.ts'
import { type Outgoing, sendAll } from '../queue/send.ts'
import { settleBatch } from '../queue/settle.ts'
import {
  type ClaimedRow,
  claimNotification,
  markSendFailure,
  markSent,
  notificationState,
  recordSentMessage,
  supersedeFallback,
  suppressAuthoritative,
} from './claim.ts'
import { DispatchMessageSchema, dispatchFor } from './message.ts'
import { SendError, type Sent, transportFor } from './transports/index.ts'

/** Sends in flight at once from one batch. */
const SEND_CONCURRENCY = 6

type Claim = { message: Message<unknown>; id: string; statement: number }

/**
 * Consumer of `notify-dispatch` (DESIGN §4–5): claim each notification
 * (`pending → sending` with a lease; one winner), settle verification
 * decisions that arrived from both sources, send through the configured
 * transport, and record the result — claims in one D1 batch, results in one
 * more. Status counters follow the rows by trigger (migration 0004). Transient send failures retry 5 s / 30 s, then dead-letter;
 * permanent ones end the notification `failed` without a retry.
 */
export async function consumeDispatch(batch: MessageBatch<unknown>, env: Env, log: Logger): Promise<void> {
  const config = configOf(env)
  const now = new Date()
  const nowIso = now.toISOString()
  const leaseUntil = new Date(now.getTime() + config.DISPATCH_LEASE_SECONDS * 1000).toISOString()
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
      supersedeFallback(env.DB, id, nowIso),
      suppressAuthoritative(env.DB, id, nowIso),
      claimNotification(env.DB, id, nowIso, leaseUntil),
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

  // 3. Send, a few at a time.
  const transport = transportFor(env, config)
  const outcomes = new Map<Message<unknown>, { row: ClaimedRow; sent?: Sent; error?: unknown }>()
  for (let start = 0; start < toSend.length; start += SEND_CONCURRENCY) {
    await Promise.all(
      toSend.slice(start, start + SEND_CONCURRENCY).map(async ({ message, row }) => {
        try {
          const sent = await transport.send({
            notificationId: row.id,
            from: { address: config.EMAIL_FROM, name: config.EMAIL_FROM_NAME },
            to: { address: row.recipient_email as string, name: row.recipient_name },
            subject: row.subject ?? '',
            text: row.text_body ?? '',
            html: row.html_body ?? '',
          })
          outcomes.set(message, { row, sent })
        } catch (error) {
          outcomes.set(message, { row, error })
        }
      }),
    )
  }

  // 4. Record every result in one D1 batch.
  const marks: D1PreparedStatement[] = []
  const decided = new Map<Message<unknown>, { settlement: Settlement; log: () => void }>()
  for (const [message, { row, sent, error }] of outcomes) {
    const fields = {
      notificationId: row.id,
      eventId: row.event_id,
      kind: row.kind,
      source: row.source,
      traceId: row.trace_id,
    }
    if (sent) {
      marks.push(
        markSent(env.DB, row.id, sent.providerId, nowIso),
        recordSentMessage(env.DB, row.id, transport.name, sent.messageId, sent.raw, nowIso),
      )
      decided.set(message, {
        settlement: { action: 'ack' },
        log: () => log.info('notification.sent', { ...fields, transport: transport.name, providerId: sent.providerId }),
      })
      continue
    }
    const permanent = error instanceof SendError && error.permanent
    const code = permanent ? 'NTF_SEND_PERMANENT' : 'NTF_SEND_TRANSIENT'
    const reason = describeError(error)
    const failure = settleFailure(
      new PipelineError(code, reason, { cause: error }),
      message.attempts,
      config.DISPATCH_RETRY_DELAYS_SECONDS,
    )
    const settlement: Settlement = permanent
      ? { action: 'ack' }
      : failure.action === 'dead-letter'
        ? { ...failure, kind: row.kind }
        : failure
    const final = settlement.action !== 'retry'
    marks.push(markSendFailure(env.DB, row.id, final ? 'failed' : 'pending', code, reason, nowIso))
    decided.set(message, {
      settlement,
      log: () =>
        log[final ? 'error' : 'warn'](final ? 'notification.failed' : 'notification.retry', {
          ...fields,
          code,
          error: reason,
          attempts: message.attempts,
        }),
    })
  }
  try {
    if (marks.length > 0) await env.DB.batch(marks)
    for (const [message, { settlement, log: write }] of decided) {
      settlements.set(message, settlement)
      write()
    }
  } catch (cause) {
    // Sent but not marked: the row stays `sending` until its lease ends. Retrying this
    // message re-reads it; the provider's idempotency key covers a second send (DESIGN §5).
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 mark: ${(cause as Error).message}`, { cause })
    for (const message of decided.keys()) fail(message, error)
    log.error('dispatch.mark-failed', { count: decided.size, error })
  }

  // 5. Notifications that are not due yet go back on the queue with their delay.
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
