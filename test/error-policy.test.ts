/**
 * The error table decides (src/errors.ts, applied by src/queue/policy.ts): a
 * code of each decision, met in a real consumer batch, ends its message as
 * the table says; a dead letter that cannot be sent or stored waits the
 * policy's fallback delay in every consumer; and no delay given to a queue
 * exceeds the policy's cap.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it, vi } from 'vitest'
import { configOf } from '../src/config.ts'
import { type Decision, decisionOf, ERRORS, type PipelineCode } from '../src/errors.ts'
import worker from '../src/index.ts'
import type { DeadLetterEnvelope } from '../src/queue/dead-letter-envelope.ts'
import { FALLBACK_DELAY_SECONDS, MAX_DELAY_SECONDS, queueDelay, settle } from '../src/queue/policy.ts'
import { cloudflareEvent } from './email-events.ts'
import { deliverBatch, dispatchOnce, freshInbound, guid, pendingNotification, refuseInserts } from './helpers.ts'

/** A stand-in for notify-dlq that keeps what it is sent, or refuses every batch. */
function deadLetterQueue(refuse = false) {
  const sent: DeadLetterEnvelope[] = []
  const queue = {
    send: async () => {
      throw new Error('notify-dlq takes batches here')
    },
    sendBatch: async (messages: Iterable<MessageSendRequest>) => {
      if (refuse) throw new Error('notify-dlq refused the batch')
      for (const message of messages) sent.push(message.body as DeadLetterEnvelope)
    },
  } as unknown as Queue
  return { queue, sent }
}

/** A stand-in for the send_email binding that refuses every send as the binding does (an Error, with a `code` if given). */
function refusingBinding(message: string, code?: string): SendEmail {
  return {
    send: async () => {
      throw Object.assign(new Error(message), code ? { code } : {})
    },
  } as unknown as SendEmail
}

const rowOf = (id: string) =>
  env.DB.prepare('SELECT status, error_code FROM notifications WHERE id = ?1')
    .bind(id)
    .first<{ status: string; error_code: string | null }>()

/** A pipeline code whose decision is `decision` (asserting the table still says so). */
function codeWith(code: PipelineCode, decision: Decision): PipelineCode {
  expect(decisionOf(code)).toBe(decision)
  return code
}

/** A message of each consumer whose code is a `dead-letter` one: an invalid body. */
function invalidMessages() {
  const event = freshInbound('response.created', (value) => {
    delete (value.data as { recipient: Record<string, unknown> }).recipient.email
  })
  const delivery = cloudflareEvent('delivered', `m-${guid()}`, 'x@example.com')
  delete (delivery.payload as Record<string, unknown>).eventId
  return [
    { queue: 'notify-events', body: event as unknown, field: 'data.recipient.email' },
    { queue: 'notify-dispatch', body: { wrong: guid() }, field: 'notificationId' },
    { queue: 'notify-email-events', body: delivery, field: 'payload.eventId' },
  ]
}

describe('the error table decides what becomes of a message', () => {
  it('declares retry, dead-letter, skip and wait, and the policy settles every code as its decision says', () => {
    const decisions = new Set(Object.values(ERRORS).flatMap((entry) => ('decision' in entry ? [entry.decision] : [])))
    // Each decision has its test in a real consumer below: a new one needs its own.
    expect([...decisions].sort()).toEqual(['dead-letter', 'retry', 'skip', 'wait'])
    const expected: Record<Decision, string> = {
      retry: 'retry',
      'dead-letter': 'dead-letter',
      skip: 'ack',
      wait: 'ack',
    }
    for (const code of Object.keys(ERRORS) as (keyof typeof ERRORS)[]) {
      const entry = ERRORS[code]
      if (!('decision' in entry)) continue
      const first = settle({ code: code as PipelineCode, error: 'e' }, 1, [7])
      expect(first.action, code).toBe(expected[entry.decision])
      if (first.action === 'retry') expect(first.delaySeconds).toBe(7)
      // The attempts used up: a retry code becomes a dead letter carrying its failure.
      const last = settle({ code: code as PipelineCode, error: 'e', kind: 'K' }, 2, [7])
      expect(last.action, code).toBe(entry.decision === 'retry' ? 'dead-letter' : expected[entry.decision])
      if (last.action === 'dead-letter') expect(last).toEqual({ action: 'dead-letter', code, error: 'e', kind: 'K' })
    }
  })

  it('retry: NTF_DEPENDENCY_FAILED in notify-events is retried after each RETRY_DELAYS_SECONDS delay, then dead-lettered', async () => {
    const code = codeWith('NTF_DEPENDENCY_FAILED', 'retry')
    const event = freshInbound('invitation.created')
    const eventId = JSON.parse(event.body).envelope.eventId as string
    const repair = await refuseInserts('processed_marks', `NEW.event_id = '${eventId}'`, `injected for ${eventId}`)
    const dlq = deadLetterQueue()
    const vars = { RETRY_DELAYS_SECONDS: '7,11', DLQ: dlq.queue }
    try {
      const id = `msg-${guid()}`
      const first = await deliverBatch([{ id, attempts: 1, body: event }], 'notify-events', vars)
      expect(first.retryMessages).toEqual([{ msgId: id, delaySeconds: 7 }])
      expect(first.explicitAcks).toEqual([])
      const second = await deliverBatch([{ id, attempts: 2, body: event }], 'notify-events', vars)
      expect(second.retryMessages).toEqual([{ msgId: id, delaySeconds: 11 }])
      expect(dlq.sent).toEqual([])
      const last = await deliverBatch([{ id, attempts: 3, body: event }], 'notify-events', vars)
      expect(last.retryMessages).toEqual([])
      expect(last.explicitAcks).toEqual([id])
      expect(dlq.sent).toHaveLength(1)
      expect(dlq.sent[0]).toMatchObject({ queue: 'notify-events', code, attempts: 3, message: event })
      expect(dlq.sent[0]?.error).toContain(`injected for ${eventId}`)
    } finally {
      await repair()
    }
  })

  it('dead-letter: NTF_INVALID_PAYLOAD is dead-lettered at once, without a retry, by notify-events, notify-dispatch and notify-email-events', async () => {
    const code = codeWith('NTF_INVALID_PAYLOAD', 'dead-letter')
    for (const { queue, body, field } of invalidMessages()) {
      const dlq = deadLetterQueue()
      const id = `msg-${guid()}`
      const result = await deliverBatch([{ id, attempts: 1, body }], queue, { DLQ: dlq.queue })
      expect(result.retryMessages, queue).toEqual([])
      expect(result.explicitAcks, queue).toEqual([id])
      expect(dlq.sent, queue).toHaveLength(1)
      expect(dlq.sent[0], queue).toMatchObject({ queue, code, attempts: 1, message: body })
      expect(dlq.sent[0]?.error, queue).toContain(field)
    }
  })

  it('skip: NTF_RECIPIENT_SUPPRESSED in notify-dispatch is acked: no retry, no next try, no dead letter', async () => {
    const code = codeWith('NTF_RECIPIENT_SUPPRESSED', 'skip')
    const id = await pendingNotification(`policy-skip-${guid().slice(0, 8)}@example.com`)
    const dlq = deadLetterQueue()
    const binding = refusingBinding('Recipient is on suppression list', 'E_RECIPIENT_SUPPRESSED')
    const result = await dispatchOnce({ notificationId: id }, { EMAIL: binding, DLQ: dlq.queue })
    expect(await rowOf(id)).toEqual({ status: 'suppressed', error_code: code })
    expect(result.explicitAcks).toHaveLength(1)
    expect(result.delays).toEqual([])
    expect(result.enqueued).toEqual([])
    expect(dlq.sent).toEqual([])
  })

  it('wait: NTF_SEND_UNKNOWN and NTF_TRANSPORT_PAUSED in notify-dispatch are acked, the row holding the wait: no retry, no next try, no dead letter', async () => {
    const cases = [
      // A refusal without a code that does not read as permanent: whether it went out is not known.
      { code: codeWith('NTF_SEND_UNKNOWN', 'wait'), status: 'unknown', binding: refusingBinding('connection reset') },
      {
        code: codeWith('NTF_TRANSPORT_PAUSED', 'wait'),
        status: 'paused',
        binding: refusingBinding('sender not verified', 'E_SENDER_NOT_VERIFIED'),
      },
    ]
    const ids: string[] = []
    try {
      for (const { code, status, binding } of cases) {
        const id = await pendingNotification(`policy-wait-${guid().slice(0, 8)}@example.com`)
        ids.push(id)
        const dlq = deadLetterQueue()
        const result = await dispatchOnce({ notificationId: id }, { EMAIL: binding, DLQ: dlq.queue })
        expect(await rowOf(id), code).toEqual({ status, error_code: code })
        expect(result.explicitAcks, code).toHaveLength(1)
        expect(result.delays, code).toEqual([])
        expect(result.enqueued, code).toEqual([])
        expect(dlq.sent, code).toEqual([])
      }
    } finally {
      // A pause or an unknown outcome would otherwise hold or resend later tests' notifications.
      await env.DB.prepare('DELETE FROM transport_pauses').run()
      await env.DB.prepare("UPDATE notifications SET status = 'failed' WHERE id IN (SELECT value FROM json_each(?1))")
        .bind(JSON.stringify(ids))
        .run()
    }
  })
})

describe("the policy's fallback delay and cap", () => {
  it('a dead letter notify-dlq refuses: notify-events, notify-dispatch and notify-email-events retry its message after the fallback delay', async () => {
    for (const { queue, body } of invalidMessages()) {
      const dlq = deadLetterQueue(true)
      const id = `msg-${guid()}`
      const result = await deliverBatch([{ id, attempts: 1, body }], queue, { DLQ: dlq.queue })
      expect(result.explicitAcks, queue).toEqual([])
      expect(result.retryMessages, queue).toEqual([{ msgId: id, delaySeconds: FALLBACK_DELAY_SECONDS }])
    }
  })

  it('a dead letter D1 refuses: notify-dlq retries it after the fallback delay, doubled on the next delivery', async () => {
    const event = freshInbound('person-upserted')
    const eventId = event.headers['message-id'] as string
    const repair = await refuseInserts('dead_letters', `NEW.event_id = '${eventId}'`, 'injected')
    try {
      for (const attempts of [1, 2]) {
        const result = await deliverBatch([{ id: 'unstored', attempts, body: event }], 'notify-dlq')
        expect(result.explicitAcks).toEqual([])
        expect(result.retryMessages).toEqual([
          { msgId: 'unstored', delaySeconds: FALLBACK_DELAY_SECONDS * 2 ** (attempts - 1) },
        ])
      }
    } finally {
      await repair()
    }
  })

  it('a batch from a queue without a consumer (NTF_UNKNOWN_QUEUE) is retried whole after the fallback delay', async () => {
    codeWith('NTF_UNKNOWN_QUEUE', 'retry')
    const batch = createMessageBatch('notify-nowhere', [{ id: 'lost', timestamp: new Date(), attempts: 1, body: {} }])
    const retryAll = vi.spyOn(batch, 'retryAll')
    const ctx = createExecutionContext()
    await worker.queue(batch, env)
    await getQueueResult(batch, ctx)
    expect(retryAll.mock.calls).toEqual([[{ delaySeconds: FALLBACK_DELAY_SECONDS }]])
  })

  it('no queue delay exceeds 12 hours: a notification due in two days goes back with the cap, and config refuses a longer retry delay', async () => {
    expect(MAX_DELAY_SECONDS).toBe(12 * 3600)
    expect(queueDelay(MAX_DELAY_SECONDS + 1)).toBe(MAX_DELAY_SECONDS)
    expect(queueDelay(4.2)).toBe(5)
    const due = new Date(Date.now() + 2 * 86_400_000).toISOString()
    const id = await pendingNotification(`policy-cap-${guid().slice(0, 8)}@example.com`, { scheduledAt: due })
    const result = await dispatchOnce({ notificationId: id })
    expect(result.explicitAcks).toHaveLength(1)
    expect(result.enqueued).toEqual([{ body: { notificationId: id, due }, delaySeconds: MAX_DELAY_SECONDS }])
    expect(() => configOf({ ...env, RETRY_DELAYS_SECONDS: `5,${MAX_DELAY_SECONDS + 1}` })).toThrow(
      /RETRY_DELAYS_SECONDS.*43200/,
    )
    expect(
      configOf({ ...env, DISPATCH_RETRY_DELAYS_SECONDS: `5,${MAX_DELAY_SECONDS}` }).DISPATCH_RETRY_DELAYS_SECONDS,
    ).toEqual([5, MAX_DELAY_SECONDS])
  })
})
