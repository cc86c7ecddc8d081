import { PipelineError } from '../errors.ts'
import { batchMembers, claimBatch, createBatch, giveBackMember, joinBatch, leaveBatch } from '../notifications/batch.ts'
import type { ClaimedRow } from '../notifications/claim.ts'
import { batchWindowGate } from '../notifications/gates.ts'
import { FINAL_STATUSES } from '../notifications/status.ts'
import type { Later, ToSend } from './claim-stage.ts'
import { dispatchFor } from './message.ts'
import type { DispatchRun } from './run.ts'
import { idempotencyEdge } from './transports/index.ts'

/** One member of a batch to send; `message` is absent for a member claimed with its batch, not by its own message. */
export type BatchMember = { row: ClaimedRow; message: Message<unknown> | undefined }

/** A batch to send: its idempotency key and its members in their order. */
export type BatchToSend = { batchId: string; members: BatchMember[] }

/** How soon a member given back (its batch is partly held by another delivery) asks again. */
const HELD_RETRY_SECONDS = 30

/**
 * Sorts the claimed notifications into what is sent alone and what is sent in
 * batches. A notification already in a batch (a retry of it) is sent only
 * with its batch, under its key: the rest of the batch is claimed too, and when
 * another delivery holds a part of it, the part this one took is given back
 * (its attempt not counted) to ask again shortly (`retriedBatches`). New batches, of up to
 * `size`, are made of first tries when the transport can send batches: their
 * membership is written (one D1 batch) before anything is sent, and a
 * notification whose membership could not be written is sent alone.
 */
export async function batchStage(
  run: DispatchRun,
  toSend: readonly ToSend[],
  options: { size: number; transport: string; canBatch: boolean },
): Promise<{ alone: ToSend[]; batches: BatchToSend[]; later: Later[] }> {
  const alone: ToSend[] = []
  const later: Later[] = []
  const retries = new Map<string, ToSend[]>()
  const fresh: ToSend[] = []
  for (const item of toSend) {
    if (item.row.batch_id) retries.set(item.row.batch_id, [...(retries.get(item.row.batch_id) ?? []), item])
    // Only a first try joins a batch: after a try whose outcome is not known (a lost answer), the
    // retry must be the very request it was, under its own key, or the provider could send it twice.
    // Nor does a verification decision: a batch's retry takes its members without the claim's decision holds.
    else if (
      options.canBatch &&
      options.size > 1 &&
      item.row.send_alone === 0 &&
      item.row.send_attempts === 1 &&
      item.row.decision_person === null
    )
      fresh.push(item)
    else alone.push(item)
  }
  const batches = [...(await retriedBatches(run, retries, later))]
  for (let at = 0; at < fresh.length; at += options.size) {
    const chunk = fresh.slice(at, at + options.size)
    if (chunk.length === 1) alone.push(...chunk)
    else {
      const made = await newBatch(run, chunk, options.transport)
      if (made === 'alone') alone.push(...chunk)
      else if (made !== 'failed') batches.push(made)
    }
  }
  return { alone, batches, later }
}

/**
 * The batches whose members came back for another try. A batch whose key may
 * be past the provider's window waits for delivery events instead
 * (`batchWindowGate`). Otherwise its members are claimed: when every member
 * not yet final is this delivery's, the batch's request goes again with
 * them, in their order, under the same key — all of them, or those left
 * when some went their own way meanwhile (an erasure, an operator's replay):
 * the provider answers a repeat with its first answer, refuses a request
 * that lost members (409) when it had taken the first — whose emails then
 * went out — and sends the rest when it had not, so each member goes once.
 * When another delivery holds a part of the batch, or a member waits (paused),
 * the part this one took is given back, its attempt not counted, to ask again shortly.
 */
async function retriedBatches(
  run: DispatchRun,
  retries: ReadonlyMap<string, ToSend[]>,
  later: Later[],
): Promise<BatchToSend[]> {
  if (retries.size === 0) return []
  const { env, nowIso, lease, config } = run
  const ids = [...retries.keys()]
  const edge = idempotencyEdge(config, run.now)
  const decideAt = new Date(run.now.getTime() + config.UNKNOWN_OUTCOME_SECONDS * 1000).toISOString()
  let results: D1Result[]
  try {
    results = await env.DB.batch(
      ids.flatMap((id) => [
        batchWindowGate(env.DB, id, nowIso, edge, decideAt, lease.token),
        claimBatch(env.DB, id, nowIso, lease.until, lease.token),
        batchMembers(env.DB, id),
      ]),
    )
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 batch claim: ${(cause as Error).message}`, { cause })
    for (const items of retries.values()) for (const item of items) run.fail(item.message, error)
    return []
  }
  const toSend: BatchToSend[] = []
  const givenBack: D1PreparedStatement[] = []
  ids.forEach((id, index) => {
    const pastWindow = results[index * 3]?.results ?? []
    const members = (results[index * 3 + 2]?.results ?? []) as (ClaimedRow & { claim_token: string | null })[]
    const messages = new Map((retries.get(id) ?? []).map((item) => [item.row.id, item.message]))
    const mine = members.filter((member) => member.status === 'sending' && member.claim_token === lease.token)
    const open = members.filter((member) => !isFinal(member.status) && !mine.includes(member))
    if (pastWindow.length > 0) {
      run.log.warn('dispatch.batch-past-window', { batchId: id, members: members.length, code: 'NTF_SEND_UNKNOWN' })
    }
    if (mine.length > 0 && open.length === 0) {
      if (mine.length < members.length) {
        run.log.info('dispatch.batch-reduced', { batchId: id, members: members.length, left: mine.length })
      }
      toSend.push({ batchId: id, members: mine.map((row) => ({ row, message: messages.get(row.id) })) })
      for (const [notificationId, message] of messages) {
        if (!mine.some((member) => member.id === notificationId)) run.settle(message, { action: 'ack' })
      }
      return
    }
    if (mine.length === 0) {
      // Nothing of it is this delivery's to send: it waits for its outcome (past the window), or is done.
      for (const message of messages.values()) run.settle(message, { action: 'ack' })
      return
    }
    // Another delivery holds a part of this batch, or a member waits: not sent from here.
    run.log.info('dispatch.batch-held', { batchId: id, members: members.length, held: mine.length })
    for (const member of mine) givenBack.push(giveBackMember(env.DB, member.id, nowIso, lease.token))
    for (const [notificationId, message] of messages) {
      const row = members.find((member) => member.id === notificationId)
      const { body } = dispatchFor(notificationId, String(row?.scheduled_at ?? nowIso), run.now)
      later.push({ message, outgoing: { body, delaySeconds: HELD_RETRY_SECONDS } })
    }
  })
  if (givenBack.length > 0) {
    // If this fails, the members stay held until their lease ends, and the cron takes them up then.
    await env.DB.batch(givenBack).catch((error: unknown) => run.log.warn('dispatch.give-back-failed', { error }))
  }
  return toSend
}

function isFinal(status: string): boolean {
  return (FINAL_STATUSES as readonly string[]).includes(status)
}

/**
 * A new batch of these claimed notifications, written before anything is
 * sent; `alone` when it was not written (each is sent alone), `failed` when
 * its membership was written in part and could not be undone (their messages
 * are retried: a notification with a batch is never sent without it).
 */
async function newBatch(
  run: DispatchRun,
  chunk: ToSend[],
  transport: string,
): Promise<BatchToSend | 'alone' | 'failed'> {
  const { env, nowIso, lease } = run
  const batchId = `bat_${crypto.randomUUID().replaceAll('-', '')}`
  let results: D1Result[]
  try {
    results = await env.DB.batch([
      createBatch(env.DB, batchId, transport, chunk.length, nowIso),
      ...chunk.map((item, position) => joinBatch(env.DB, item.row.id, batchId, position, lease.token)),
    ])
  } catch (error) {
    // One D1 batch is one transaction: nothing of the batch was written.
    run.log.warn('dispatch.batch-not-made', { batchId, error })
    return 'alone'
  }
  if (results.slice(1).every((result) => result.meta.changes === 1)) {
    return {
      batchId,
      members: chunk.map((item, position) => ({
        row: { ...item.row, batch_id: batchId, batch_position: position },
        message: item.message,
      })),
    }
  }
  // A member was no longer ours (its lease was taken over): nothing was sent yet, so the batch goes.
  try {
    await env.DB.batch([leaveBatch(env.DB, batchId, lease.token, false)])
    return 'alone'
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 batch: ${(cause as Error).message}`, { cause })
    for (const item of chunk) run.fail(item.message, error)
    return 'failed'
  }
}
