import { PipelineError } from '../../errors.ts'
import {
  bundleMembers,
  claimBundle,
  createBundle,
  giveBackMember,
  joinBundle,
  leaveBundle,
  leaveBundleAlone,
} from '../../notifications/bundles.ts'
import { endCancelledMembers } from '../../notifications/cancel.ts'
import type { ClaimedRow } from '../../notifications/claim.ts'
import { bundleWindowGate } from '../../notifications/gates.ts'
import { FINAL_STATUSES } from '../../notifications/status.ts'
import { dispatchFor } from '../../queue/dispatch-message.ts'
import type { Bundle, DispatchRun, Later, ToSend } from '../run.ts'
import { idempotencyEdge } from '../transports/index.ts'

/** How soon a member given back (its bundle is partly held by another delivery) asks again. */
const HELD_RETRY_SECONDS = 30

/**
 * Sorts the claimed notifications into what is sent alone and what is sent in
 * bundles. A notification already in a bundle (a retry of it) is sent only
 * with its bundle, under its key: the rest of the bundle is claimed too, and when
 * another delivery holds a part of it, the part this one took is given back
 * (its attempt not counted) to ask again shortly (`retriedBundles`). New bundles, of up to
 * `size`, are made of first tries when the transport can send bundles: their
 * membership is written (one D1 transaction) before anything is sent, and a
 * notification whose membership could not be written is sent alone.
 */
export async function bundleStage(
  run: DispatchRun,
  toSend: readonly ToSend[],
  options: { size: number; transport: string; canBundle: boolean },
): Promise<{ alone: ToSend[]; bundles: Bundle[]; later: Later[] }> {
  const alone: ToSend[] = []
  const later: Later[] = []
  const retries = new Map<string, ToSend[]>()
  const fresh: ToSend[] = []
  const strays: ToSend[] = []
  for (const item of toSend) {
    // A bundle's member routed to a transport that sends no bundles (the bundle's own is paused).
    if (item.row.batch_id && !options.canBundle) strays.push(item)
    else if (item.row.batch_id) retries.set(item.row.batch_id, [...(retries.get(item.row.batch_id) ?? []), item])
    // Only a first try joins a bundle: after a try whose outcome is not known (a lost answer), the
    // retry must be the very request it was, under its own key, or the provider could send it twice.
    // Nor does a verification decision: a bundle's retry takes its members without the claim's decision holds.
    else if (
      options.canBundle &&
      options.size > 1 &&
      item.row.send_alone === 0 &&
      item.row.send_attempts === 1 &&
      item.row.decision_person === null
    )
      fresh.push(item)
    else alone.push(item)
  }
  alone.push(...(await leaveForAlone(run, strays)))
  const bundles = [...(await retriedBundles(run, retries, later, options.transport))]
  for (let at = 0; at < fresh.length; at += options.size) {
    const chunk = fresh.slice(at, at + options.size)
    if (chunk.length === 1) alone.push(...chunk)
    else {
      const made = await newBundle(run, chunk, options.transport)
      if (made === 'alone') alone.push(...chunk)
      else if (made !== 'failed') bundles.push(made)
    }
  }
  return { alone, bundles, later }
}

/**
 * The bundles whose members came back for another try. A bundle whose key may
 * be past the provider's window waits for delivery events instead
 * (`bundleWindowGate`). Otherwise its members are claimed: when every member
 * not yet final is this delivery's, the bundle's request goes again with
 * them, in their order, under the same key — all of them, or those left
 * when some went their own way meanwhile (an erasure, an operator's replay, a cancellation):
 * the provider answers a repeat with its first answer, refuses a request
 * that lost members (409) when it had taken the first — whose emails then
 * went out — and sends the rest when it had not, so each member goes once.
 * When another delivery holds a part of the bundle, or a member waits (paused),
 * the part this one took is given back, its attempt not counted, to ask again shortly.
 */
async function retriedBundles(
  run: DispatchRun,
  retries: ReadonlyMap<string, ToSend[]>,
  later: Later[],
  transport: string,
): Promise<Bundle[]> {
  if (retries.size === 0) return []
  const { env, nowIso, lease, config } = run
  const ids = [...retries.keys()]
  const edge = idempotencyEdge(config, run.now)
  const decideAt = new Date(run.now.getTime() + config.UNKNOWN_OUTCOME_SECONDS * 1000).toISOString()
  let results: D1Result[]
  try {
    results = await env.DB.batch(
      ids.flatMap((id) => [
        bundleWindowGate(env.DB, id, nowIso, edge, decideAt, lease.token),
        // A member a cancellation marked in flight, back without any chance of having gone, leaves the bundle.
        endCancelledMembers(env.DB, id, nowIso),
        claimBundle(env.DB, id, nowIso, lease.until, lease.token, transport),
        bundleMembers(env.DB, id),
      ]),
    )
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 batch claim: ${(cause as Error).message}`, { cause })
    for (const items of retries.values()) for (const item of items) run.fail(item.message, error)
    return []
  }
  const toSend: Bundle[] = []
  const givenBack: D1PreparedStatement[] = []
  ids.forEach((id, index) => {
    const pastWindow = results[index * 4]?.results ?? []
    const members = (results[index * 4 + 3]?.results ?? []) as (ClaimedRow & { claim_token: string | null })[]
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
      toSend.push({ id, members: mine.map((row) => ({ row, message: messages.get(row.id) })) })
      for (const [notificationId, message] of messages) {
        if (!mine.some((member) => member.id === notificationId)) run.ack(message)
      }
      return
    }
    if (mine.length === 0) {
      // Nothing of it is this delivery's to send: it waits for its outcome (past the window), or is done.
      for (const message of messages.values()) run.ack(message)
      return
    }
    // Another delivery holds a part of this bundle, or a member waits: not sent from here.
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

/**
 * Members of bundles whose claim chose a transport that sends no bundles
 * leave them, to be sent alone (`leaveBundleAlone`). If that cannot be
 * written, their messages are retried: a member is never sent without its bundle.
 */
async function leaveForAlone(run: DispatchRun, strays: readonly ToSend[]): Promise<ToSend[]> {
  if (strays.length === 0) return []
  const { env, lease } = run
  let results: D1Result[]
  try {
    results = await env.DB.batch(strays.map((item) => leaveBundleAlone(env.DB, item.row.id, lease.token)))
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 batch: ${(cause as Error).message}`, { cause })
    for (const item of strays) run.fail(item.message, error)
    return []
  }
  run.log.info('dispatch.batch-left', { members: strays.length })
  // One no longer held by this claim (its lease was taken over) is the other claim's to send.
  const left = strays.filter((_, index) => (results[index]?.meta.changes ?? 0) > 0)
  for (const item of strays) if (!left.includes(item)) run.ack(item.message)
  return left.map((item) => ({ ...item, row: { ...item.row, batch_id: null, batch_position: null } }))
}

function isFinal(status: string): boolean {
  return (FINAL_STATUSES as readonly string[]).includes(status)
}

/**
 * A new bundle of these claimed notifications, written before anything is
 * sent; `alone` when it was not written (each is sent alone), `failed` when
 * its membership was written in part and could not be undone (their messages
 * are retried: a notification with a bundle is never sent without it).
 */
async function newBundle(run: DispatchRun, chunk: ToSend[], transport: string): Promise<Bundle | 'alone' | 'failed'> {
  const { env, nowIso, lease } = run
  const batchId = `bat_${crypto.randomUUID().replaceAll('-', '')}`
  let results: D1Result[]
  try {
    results = await env.DB.batch([
      createBundle(env.DB, batchId, transport, chunk.length, nowIso),
      ...chunk.map((item, position) => joinBundle(env.DB, item.row.id, batchId, position, lease.token)),
    ])
  } catch (error) {
    // One D1 transaction is one transaction: nothing of the bundle was written.
    run.log.warn('dispatch.batch-not-made', { batchId, error })
    return 'alone'
  }
  if (results.slice(1).every((result) => result.meta.changes === 1)) {
    return {
      id: batchId,
      members: chunk.map((item, position) => ({
        row: { ...item.row, batch_id: batchId, batch_position: position },
        message: item.message,
      })),
    }
  }
  // A member was no longer ours (its lease was taken over): nothing was sent yet, so the bundle goes.
  try {
    await env.DB.batch([leaveBundle(env.DB, batchId, lease.token, false)])
    return 'alone'
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 batch: ${(cause as Error).message}`, { cause })
    for (const item of chunk) run.fail(item.message, error)
    return 'failed'
  }
}
