import type { Config } from '../../config.ts'
import { GroupCommit } from '../../d1/group-commit.ts'
import type { Logger } from '../../log.ts'
import type { Mail } from '../../mail/mime.ts'
import type { ClaimedRow } from '../../notifications/claim.ts'
import { type CountedChange, countChanges } from '../../notifications/counted.ts'
import type { Settlement } from '../../queue/policy.ts'
import type { Outgoing } from '../../queue/send.ts'
import type { DispatchLease } from '../lease.ts'
import type { Pace } from '../pace/client.ts'
import type { TransportPause, TransportState } from '../pause.ts'
import type { Bundle, DispatchRun, Later, Marked, ToSend } from '../run.ts'
import { type Courier, type Delivered, SendError, sendErrorOf, type Transport } from '../transports/index.ts'

/** Sends in flight at once from one batch. */
const SEND_CONCURRENCY = 6

/** What sending (and marking) one notification or bundle needs. */
export type SendContext = {
  env: Env
  config: Config
  log: Logger
  lease: DispatchLease
  /** Where the batch's notifications go: the email transport, or the in-app feeds. */
  transport: Courier
  /** Where the marks are written, grouped with those of sends that finished meanwhile, and counted. */
  marks: GroupCommit<CountedChange>
  /** The transport's pause (or open circuit) as the claim read it: an accepted send ends it. */
  pause: TransportPause | undefined
  /** The transport's failures in a row as the claim read them: an accepted send clears them. */
  outages: number
  /** The account's send pace, for a transport that has one (resend). */
  pace: Pace | undefined
}

/**
 * How one try ended, before anything of it is written: accepted (one `Delivered`
 * per email of the request), refused (or failed: a `SendError`), not started
 * because the pace had no slot soon enough, or not started because the lease
 * could not be renewed.
 */
export type Tried = { sent: Delivered[] } | { refused: SendError } | { pacedTo: Date } | { leaseAtRisk: true }

/** The mark stage: records a try's outcome and says how each of its messages ends. */
export type MarkStage = (context: SendContext, work: ToSend | Bundle, tried: Tried) => Promise<Marked[]>

/**
 * Sends what the batch claimed, a few at a time, through the transport —
 * under `state`, the email transport's pause and circuit as the claim read
 * them (an accepted send ends them; none for the in-app feeds, whose
 * deliveries end no pause of email's) —
 * each notification alone, or a bundle in one request — and hands each try's
 * outcome to the mark stage (`mark`) as soon as it ends, so its result is
 * written with those that finished while the previous write was in flight
 * (GroupCommit), never held until the whole batch is sent. The lease is
 * renewed while sends run. Returns the messages of next tries: those of
 * claimed messages (acked once they are on the queue) and those of bundle
 * members claimed with their bundle, which have no message here.
 */
export async function sendStage(
  run: DispatchRun,
  transport: Courier,
  pace: Pace | undefined,
  work: { alone: readonly ToSend[]; bundles: readonly Bundle[] },
  mark: MarkStage,
  state: TransportState | undefined,
): Promise<{ retries: Later[]; orphans: Outgoing[] }> {
  const { env, config, log, lease } = run
  const marks = new GroupCommit<CountedChange>(env.DB, (changes) => countChanges(env.DB, changes))
  const context: SendContext = {
    env,
    config,
    log,
    lease,
    transport,
    marks,
    pause: state?.pause,
    outages: state?.outages ?? 0,
    pace,
  }
  const queue: (ToSend | Bundle)[] = [...work.bundles, ...work.alone]
  const retries: Later[] = []
  const orphans: Outgoing[] = []
  // A retry's message goes out with the ones not due yet; the message is acked only after that.
  const settle = (message: Message<unknown>, settlement: Settlement, next: Outgoing | undefined) => {
    if (next) retries.push({ message, outgoing: next })
    else run.settle(message, settlement)
  }
  run.lease.start()
  try {
    await Promise.all(
      Array.from({ length: Math.min(SEND_CONCURRENCY, queue.length) }, async () => {
        for (let item = queue.shift(); item; item = queue.shift()) {
          for (const { member, settlement, next } of await mark(context, item, await tryToSend(context, item))) {
            if (member.message) settle(member.message, settlement, next)
            else if (next) orphans.push(next)
          }
        }
      }),
    )
  } finally {
    run.lease.stop()
  }
  return { retries, orphans }
}

/**
 * One try: through a paced transport it first waits for its slot (one slot
 * per request, whatever a bundle's size), and no try starts while the lease
 * cannot be renewed — checked again after the wait, which may have outlasted
 * failing renewals. A transport that cannot send bundles never got one.
 */
async function tryToSend(context: SendContext, item: ToSend | Bundle): Promise<Tried> {
  const { lease, transport, pace } = context
  const bundle = 'members' in item ? item : undefined
  if (!lease.canStartSend || (bundle && !transport.deliverBundle)) return { leaseAtRisk: true }
  // The slot is known by the request's idempotency key, which its answer names again.
  const decision = await pace?.slot(bundle ? bundle.id : (item as ToSend).row.id)
  if (decision?.kind === 'later') return { pacedTo: decision.at }
  if (!lease.canStartSend) return { leaseAtRisk: true }
  try {
    if (bundle && transport.deliverBundle) {
      return {
        sent: await transport.deliverBundle(
          bundle.members.map((member) => member.row),
          bundle.id,
        ),
      }
    }
    const sent = await transport.deliver((item as ToSend).row)
    // A transport that answers nothing took nothing we can record: a transient failure, tried again.
    if (!sent) throw new SendError('the transport answered nothing', 'transient')
    return { sent: [sent] }
  } catch (caught) {
    return { refused: sendErrorOf(caught) }
  }
}

/** The email transport as the send stage calls it: each notification as the mail its row makes. */
export function emailCourier(transport: Transport, config: Config): Courier {
  const { sendBatch } = transport
  return {
    name: transport.name,
    deliver: (row) => transport.send(mailOf(config, row)),
    deliverBundle: sendBatch
      ? (rows, key) =>
          sendBatch.call(
            transport,
            rows.map((row) => mailOf(config, row)),
            key,
          )
      : undefined,
  }
}

/** The mail of a claimed notification: everything from the stored row, so every attempt sends the same. */
export function mailOf(config: Config, row: ClaimedRow): Mail {
  return {
    notificationId: row.id,
    from: { address: config.EMAIL_FROM, name: config.EMAIL_FROM_NAME },
    to: { address: row.recipient_email as string, name: row.recipient_name },
    subject: row.subject ?? '',
    text: row.text_body ?? '',
    html: row.html_body ?? '',
    unsubscribeUrl: row.unsubscribe_url,
  }
}
