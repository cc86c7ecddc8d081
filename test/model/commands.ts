import fc from 'fast-check'
import { allRows, dbOfUser } from '../shards.ts'
import type { BindingFault } from './binding-stand-in.ts'
import { contact, decision, invitation, invitationKey, response, responseKey, withdrawal } from './events.ts'
import { during, settled } from './invariants.ts'
import type { QueuedMessage } from './model-queue.ts'
import type { ResendFault } from './resend-stand-in.ts'
import type { ModelTransport, OperatorCancel, Person, QueueBinding, World } from './world.ts'

/**
 * The commands of the lifecycle model (fast-check's model-based testing:
 * https://fast-check.dev/docs/advanced/model-based-testing/). Each does one
 * thing to the world — an event, a delivery, a fault, the clock, an
 * operator's action, a person looking at their feed — and then checks the
 * invariants (./invariants.ts): a command after which one fails is the end
 * of a counterexample, which fast-check shrinks to the fewest commands that
 * still break it. The model's own state is the world; `check` admits every
 * command. A command about a provider names the world's first transport, or
 * its `which`-th: with two transports (failover), the other one.
 */

type Model = Record<string, never>
export type Command = fc.AsyncCommand<Model, World>

/** How many people a run has: enough to share digests and throttles, few enough to meet. */
export const PEOPLE = 3

/** A command of a test's own: what it does, and how it is named. */
export function step(label: string, act: (world: World) => Promise<void>): Command {
  return new Step(label, act)
}

/** One command: what it does to the world, and how a counterexample names it. */
class Step implements Command {
  readonly #label: string
  readonly #act: (world: World) => Promise<void>

  constructor(label: string, act: (world: World) => Promise<void>) {
    this.#label = label
    this.#act = act
  }
  check(): boolean {
    return true
  }
  async run(_model: Model, world: World): Promise<void> {
    world.note(this.#label)
    await this.#act(world)
    const violations = await during(world)
    if (violations.length > 0) throw new ModelViolation(violations, world)
  }
  toString(): string {
    return this.#label
  }
}

/** A broken invariant, with the run's trace. */
export class ModelViolation extends Error {
  readonly violations: string[]
  constructor(violations: string[], world: World) {
    super(`${violations.join('\n')}\n--- trace (${world.transports.join(',')}) ---\n${world.trace.join('\n')}`)
    this.name = 'ModelViolation'
    this.violations = violations
  }
}

/**
 * Plays one run: the commands in order, then the world left to run on with
 * its faults healed; the violations of the first invariant that broke (after
 * a command, or once settled), none when every one held.
 */
export async function play(world: World, steps: readonly Command[]): Promise<string[]> {
  await world.setup()
  try {
    for (const step of steps) await step.run({}, world)
    world.note('drain')
    await world.drain()
    const violations = await settled(world)
    if (violations.length > 0) throw new ModelViolation(violations, world)
    return []
  } catch (error) {
    if (error instanceof ModelViolation) return error.violations
    throw error
  }
}

export type EventKind = 'response' | 'invitation' | 'authoritative' | 'fallback' | 'contact'

/** An event about one person, forwarded as the bridge forwards it. */
export function emit(kind: EventKind, index: number, request = 0): Command {
  const decides = kind === 'authoritative' || kind === 'fallback'
  return new Step(`emit(${kind}, person ${index}${decides ? `, request ${request}` : ''})`, (world) =>
    emitEvent(world, kind, index, request),
  )
}

/**
 * Mail for a person: an event that notifies them by email (an invitation, or
 * a response to their project), forwarded and taken by notify-events — its
 * notifications written, their dispatch messages on the queue.
 */
export function mail(kind: 'invitation' | 'response', index: number): Command {
  return new Step(`mail(${kind}, person ${index})`, async (world) => {
    await emitEvent(world, kind, index, 0)
    await world.deliver('EVENTS')
  })
}

/** Forwards an event about one person, as the bridge forwards it (./emit). */
async function emitEvent(world: World, kind: EventKind, index: number, request: number): Promise<void> {
  const person = world.people[index % world.people.length]
  // A producer sends nothing more about a person it erased.
  if (!person || person.erasedAt !== undefined) return
  const requestId = `${person.personId.slice(0, 24)}${String(request).padStart(12, '0')}`
  const event =
    kind === 'response'
      ? response(person, newResponse(person))
      : kind === 'invitation'
        ? invitation(person, nextInvitation(person))
        : kind === 'contact'
          ? contact(person)
          : world.decision(`${person.userId}/${requestId}/${kind}`, () => decision(person, requestId, kind))
  if (kind === 'contact') person.contact = true
  const status = await world.ingest([event])
  if (status !== 202) world.note(`  ingest answered ${status}`)
}

/** The id of the person's next invitation: one already withdrawn, if a withdrawal came first, else a new one. */
function nextInvitation(person: Person): string {
  const id = person.nextInvitation ?? crypto.randomUUID()
  person.nextInvitation = undefined
  person.invitations.push(id)
  return id
}

/** The id of a new response to the person's project. */
function newResponse(person: Person): string {
  const id = crypto.randomUUID()
  person.responses.push(id)
  return id
}

/**
 * The invitation a withdrawal or a cancellation names: the person's last,
 * or, when they have none yet, their next — withdrawn before its
 * invitation.created is even emitted, which must then notify nothing.
 */
function lastInvitation(person: Person): string {
  const last = person.invitations.at(-1)
  if (last !== undefined) return last
  person.nextInvitation ??= crypto.randomUUID()
  return person.nextInvitation
}

/** Which of their items a person marks seen: every one (the bell opened), or the newest alone. */
export type SeeWhich = 'all' | 'newest'

/**
 * A person looks at their feed, as their page does through the inbox route:
 * their items are marked seen — then an email escalating on one whose wait
 * has not ended is not sent. The newest alone is found on the feed's first page.
 */
export function see(index: number, which: SeeWhich = 'all'): Command {
  return new Step(`see(person ${index}, ${which})`, (world) => look(world, index, which))
}

/** The person's page marks their items seen, all of them or the newest (./see). */
async function look(world: World, index: number, which: SeeWhich): Promise<void> {
  const person = world.people[index % world.people.length]
  if (!person) return
  let target: { all: true } | { ids: string[] } = { all: true }
  if (which === 'newest') {
    const page = await world.inbox(person.userId, 'GET', '?limit=1')
    const newest = page.ok ? ((await page.json()) as { items: { id: string }[] }).items[0] : undefined
    if (!newest) {
      world.note(`  the feed shows nothing (${page.status})`)
      return
    }
    target = { ids: [newest.id] }
  }
  const answer = await world.inbox(person.userId, 'POST', '/seen', target)
  const body = answer.ok ? ((await answer.json()) as { changed: boolean }) : undefined
  world.note(`  seen ${'ids' in target ? target.ids[0] : 'all'}: ${answer.status}${body?.changed ? ', changed' : ''}`)
}

/**
 * A person opens their inbox on a page (and sees what it shows), or closes
 * it: while it is open, each item is seen the moment it reaches their feed —
 * also in the middle of a delivery of notify-dispatch, before an escalation
 * of the same batch is decided.
 */
export function inboxOpen(index: number, open: boolean): Command {
  return new Step(`inboxOpen(person ${index}, ${open ? 'open' : 'closed'})`, async (world) => {
    const person = world.people[index % world.people.length]
    if (!person) return
    person.watching = open
    if (open) await look(world, index, 'all')
  })
}

/**
 * The client withdraws the person's last invitation (invitation.withdrawn,
 * through the bridge): delivered before or after its invitation.created, as
 * notify-events delivers them.
 */
export function withdraw(index: number): Command {
  return new Step(`withdraw(person ${index})`, async (world) => {
    const person = world.people[index % world.people.length]
    if (!person || person.erasedAt !== undefined) return
    const invitationId = lastInvitation(person)
    const event = withdrawal(invitationId)
    const { envelope } = JSON.parse(event.body) as { envelope: { eventId: string } }
    world.withdrawals.set(envelope.eventId, invitationKey(invitationId))
    const status = await world.ingest([event])
    world.note(`  invitation ${invitationId}${status !== 202 ? `: ingest answered ${status}` : ''}`)
  })
}

/** What an operator's cancellation names: the person's last invitation, or the last response to their project. */
export type CancelOf = 'invitation' | 'response'

/**
 * An operator cancels the key of the person's last invitation (or of the
 * last response to their project) through `POST /v1/cancellations`. One that
 * fails half way (a D1 fault) is an operator's to try again, which the model
 * leaves to a later command.
 */
export function cancel(index: number, of: CancelOf = 'invitation'): Command {
  return new Step(`cancel(person ${index}, ${of})`, (world) => cancelLast(world, index, of))
}

/**
 * An operator cancels what is being sent, while it is in flight: at the next
 * provider request that carries a notification with a cancellation key (in
 * a command or in the drain), the key of the first such notification is
 * cancelled before the provider answers. What the request carries was
 * claimed before the cancellation: it goes, or, if the request fails with
 * nothing sent, its retry is ended `cancelled` at its claim.
 */
export function cancelInFlight(): Command {
  return new Step('cancelInFlight', async (world) => {
    world.duringNextSend(async (ids) => {
      const [row] = await allRows<{ cancellation_key: string }>(
        `SELECT cancellation_key FROM notifications
         WHERE id IN (SELECT value FROM json_each(?1)) AND cancellation_key IS NOT NULL LIMIT 1`,
        JSON.stringify(ids),
      )
      if (!row) return false
      world.note(`  while ${ids.join(', ')} is in flight:`)
      await cancelKey(world, row.cancellation_key)
      return true
    })
  })
}

/** Cancels the key of the person's last invitation, or of the last response to their project. */
async function cancelLast(world: World, index: number, of: CancelOf): Promise<void> {
  const person = world.people[index % world.people.length]
  if (!person) return
  const last = of === 'response' ? person.responses.at(-1) : lastInvitation(person)
  if (last === undefined) return
  await cancelKey(world, of === 'response' ? responseKey(last) : invitationKey(last))
}

/**
 * `POST /v1/cancellations` of a key, a millisecond after whatever came
 * before, so that every claim and write of the Worker is ordered against it
 * by its time. The model keeps each cancellation the Worker answered 200.
 */
async function cancelKey(world: World, key: string): Promise<void> {
  world.clock.set(world.clock.now + 1)
  const askedAt = world.clock.iso
  const answer = await world.operator('POST', '/v1/cancellations', { key, reason: 'the model cancels it' })
  const body = (await answer.json().catch(() => ({}))) as { notifications?: OperatorCancel['answered'] }
  const answered = body.notifications ?? []
  const outcomes = answered
    .map(
      (entry) =>
        `${entry.id} ${entry.outcome}${entry.unconfirmedThrough.length > 0 ? ` (${entry.unconfirmedThrough.join(', ')}?)` : ''}`,
    )
    .join(', ')
  world.note(`  ${key}: ${answer.status}${outcomes ? ` (${outcomes})` : ''}`)
  if (answer.status === 200) world.cancels.push({ key, askedAt, emailsBefore: world.emails().length, answered })
}

export type Pick = 'all' | 'oldest' | 'newest' | 'reversed' | 'odd'

const PICKS: Record<Pick, (visible: QueuedMessage[]) => QueuedMessage[]> = {
  all: (visible) => visible,
  oldest: (visible) => visible.slice(0, 1),
  newest: (visible) => visible.slice(-1),
  reversed: (visible) => [...visible].reverse(),
  odd: (visible) => visible.filter((_, index) => index % 2 === 1),
}

/** One consumer invocation of a queue's visible messages, picked one way or another. */
export function deliver(queue: QueueBinding, pick: Pick = 'all'): Command {
  return new Step(`deliver(${queue}, ${pick})`, async (world) => {
    await world.deliver(queue, PICKS[pick])
  })
}

/** A message delivered again after it was acknowledged (Queues deliver at least once). */
export function redeliver(queue: QueueBinding, index: number): Command {
  return new Step(`redeliver(${queue}, ${index})`, async (world) => {
    const acked = world.queues[queue].acked
    const message = acked[acked.length - 1 - (index % Math.max(1, acked.length))]
    if (message) world.queues[queue].redeliver(message)
  })
}

/** The cron trigger. */
export function cron(): Command {
  return new Step('cron', (world) => world.cron())
}

/** The clock moves on. */
export function advance(seconds: number): Command {
  return new Step(`advance(${seconds} s)`, (world) => world.advance(seconds))
}

export const RESEND_FAULTS: readonly ResendFault[] = [
  'lose-after-accept',
  'fail-5xx',
  'refuse-422',
  'rate-limit',
  'quota',
  'revoked',
  'wrong-url-404',
]
export const BINDING_FAULTS: readonly BindingFault[] = [
  'lose-after-accept',
  'internal-after-accept',
  'internal-before-accept',
  'rate-limit',
  'validation',
  'unverified',
  'daily-limit',
]

/**
 * The transport a command names: the world's `which`-th (0: the first; with
 * one transport, that one).
 */
function transportOf(world: World, which: number): ModelTransport {
  return world.transports[which % world.transports.length] as ModelTransport
}

/** How a command names the transport it is about: nothing for the first, as the commands before failover did. */
function naming(which: number): string {
  return which === 0 ? '' : `, transport ${which}`
}

/**
 * A provider's answer to its next request, in place of the normal one (the
 * transport's own list, by index): the world's first transport's, or its
 * `which`-th.
 */
export function providerFault(fault: number, which = 0): Command {
  return new Step(`providerFault(${fault}${naming(which)})`, async (world) => {
    if (transportOf(world, which) === 'resend') {
      const name = RESEND_FAULTS[fault % RESEND_FAULTS.length] as ResendFault
      world.resend.script.push(name)
      world.note(`  next answer of resend: ${name}`)
    } else {
      const name = BINDING_FAULTS[fault % BINDING_FAULTS.length] as BindingFault
      world.binding.script.push(name)
      world.note(`  next answer of cloudflare: ${name}`)
    }
  })
}

export type ProviderCondition = 'revoked' | 'quota' | 'down'

/**
 * A lasting condition of a provider (the world's first, or its `which`-th)
 * begins or ends: the key revoked (the sender unverified), a quota spent, an
 * outage (5xx and answers lost, nothing taken).
 */
export function providerState(condition: ProviderCondition, on: boolean, which = 0): Command {
  return new Step(`providerState(${condition}, ${on ? 'on' : 'off'}${naming(which)})`, async (world) => {
    const transport = transportOf(world, which)
    if (transport === 'resend') world.resend[condition] = on
    else if (condition === 'revoked') world.binding.unverified = on
    else if (condition === 'quota') world.binding.dailyLimit = on
    else world.binding.down = on
    world.note(`  ${transport}`)
  })
}

/**
 * The clock moves to the next probe of a paused transport (a second past
 * it), delivery events reaching the Worker on the way as `advance` lets them:
 * the next claim names its probe.
 */
export function advanceToProbe(): Command {
  return new Step('advanceToProbe', async (world) => {
    const pauses = await allRows<{ transport: string; probe_at: string }>(
      'SELECT transport, probe_at FROM transport_pauses ORDER BY probe_at',
    )
    const next = pauses.map((pause) => Date.parse(pause.probe_at)).find((at) => at >= world.clock.now)
    if (next === undefined) return
    world.note(`  to the probe of ${pauses.find((pause) => Date.parse(pause.probe_at) === next)?.transport}`)
    await world.advance(Math.ceil((next - world.clock.now) / 1000) + 1)
  })
}

/**
 * With two transports, the delivery events of one of them that have not
 * reached the Worker yet are lost (`World.loseEvents`): an email that may
 * have gone out through it waits for them in vain.
 */
export function loseEvents(which: number): Command {
  return new Step(`loseEvents(transport ${which})`, async (world) => {
    if (world.failover) world.loseEvents(transportOf(world, which))
  })
}

/**
 * With two transports, the next request of one (the first, or the
 * `which`-th) is taken, its answer lost, and no delivery event will ever
 * report it (`World.takenSilently`).
 */
export function takenSilently(which = 0): Command {
  return new Step(`takenSilently(${which === 0 ? 'first' : `transport ${which}`})`, async (world) => {
    if (world.failover) world.takenSilently(transportOf(world, which))
  })
}

/**
 * With two transports, the clock moves on while no delivery event reaches
 * the Worker (`World.lateEvents`): they come after the wait for them ended.
 */
export function lateEvents(seconds: number): Command {
  return new Step(`lateEvents(${seconds} s)`, async (world) => {
    if (world.failover) await world.lateEvents(seconds)
  })
}

/** The k-th D1 call from now fails: a write lost between two steps. */
export function failD1(k: number): Command {
  return new Step(`failD1(${k})`, async (world) => {
    world.d1.failCall(k)
  })
}

/** A queue refuses sends (or takes them again). */
export function refuseQueue(queue: QueueBinding, on: boolean): Command {
  return new Step(`refuseQueue(${queue}, ${on ? 'on' : 'off'})`, async (world) => {
    world.queues[queue].refusing = on
  })
}

export type ReportKind = 'sent' | 'delivered' | 'bounced' | 'complained'

/** The provider reports on an email it accepted: through Resend's signed webhook, or Cloudflare's event queue. */
export function report(index: number, kind: ReportKind): Command {
  return new Step(`report(email ${index}, ${kind})`, async (world) => {
    const emails = world.emails()
    const email = emails[index % Math.max(1, emails.length)]
    if (!email) return
    if (email.transport === 'resend') {
      const data =
        kind === 'bounced'
          ? { bounce: { type: 'Permanent', subType: 'General', message: `550 5.1.1 <${email.to}> unknown` } }
          : {}
      const status = await world.resendWebhook(
        { id: email.providerId, to: email.to, headers: email.headers },
        `email.${kind}`,
        data,
      )
      if (status !== 202) world.note(`  webhook answered ${status}`)
    } else if (kind !== 'sent') {
      await world.cloudflareEvent(kind, email.providerId, email.to)
    }
  })
}

/** An operator replays, or discards, one of the open dead letters. */
export function operate(action: 'replay' | 'discard', index: number): Command {
  return new Step(`operate(${action}, ${index})`, async (world) => {
    // Every shard's open letters, in the order the operator's list gives them.
    const results = (
      await allRows<{ id: string; queue: string; notification: string | null; first_seen: string }>(
        "SELECT id, queue, json_extract(body, '$.notificationId') AS notification, first_seen FROM dead_letters WHERE status = 'open'",
      )
    ).sort((a, b) => byText(a.first_seen, b.first_seen) || byText(a.id, b.id))
    const letter = results[index % Math.max(1, results.length)]
    if (!letter) return
    const response =
      action === 'replay'
        ? await world.operator('POST', `/v1/dead-letters/${letter.id}/replay`)
        : await world.operator('POST', `/v1/dead-letters/${letter.id}/discard`, { reason: 'the model discards it' })
    const answer = (await response.json()) as { replayed?: string[] }
    world.note(`  ${action} ${letter.queue} ${letter.notification ?? letter.id}: ${response.status}`)
    if (!letter.notification) return
    if (action === 'replay' && answer.replayed?.includes(letter.id)) {
      world.replays.set(letter.notification, (world.replays.get(letter.notification) ?? 0) + 1)
      world.replayedAt.set(letter.notification, [...(world.replayedAt.get(letter.notification) ?? []), world.clock.now])
    }
    if (action === 'discard' && response.ok) world.discarded.add(letter.notification)
  })
}

/** An operator erases a person, by user id or by address. */
export function erase(index: number, by: 'userId' | 'address'): Command {
  return new Step(`erase(person ${index}, by ${by})`, async (world) => {
    const person = world.people[index % world.people.length]
    if (!person || person.erasedAt !== undefined) return
    // By an address D1 links to the person (an operator names one from a record), else by the user id.
    const known = await (await dbOfUser(person.userId))
      .prepare(
        `SELECT email FROM contacts WHERE user_id = ?1
       UNION ALL SELECT recipient_email FROM notifications WHERE recipient_user_id = ?1 AND recipient_email IS NOT NULL
       LIMIT 1`,
      )
      .bind(person.userId)
      .first<{ email: string }>()
    const address = known?.email
    const response = await world.operator(
      'POST',
      '/v1/erasures',
      by === 'address' && address ? { address } : { userId: person.userId },
    )
    if (response.ok) person.erasedAt = world.clock.now
    else world.note(`  erasure answered ${response.status}`)
  })
}

/** A person's address changes: their next events carry the new one (their contact too, when it comes). */
export function changeAddress(index: number): Command {
  return new Step(`changeAddress(person ${index})`, async (world) => {
    const person = world.people[index % world.people.length]
    if (!person || person.erasedAt !== undefined) return
    person.formerEmails = [...(person.formerEmails ?? []), person.email]
    person.email = `New${person.formerEmails.length}.${person.email}`
  })
}

const QUEUE = fc.constantFrom<QueueBinding>('EVENTS', 'DISPATCH', 'EMAIL_EVENTS', 'DLQ')
const PERSON = fc.nat({ max: PEOPLE - 1 })

/** Every command, weighted as a run should meet them: mostly traffic and deliveries, now and then a fault. */
export const commandArbitraries: fc.Arbitrary<Command>[] = [
  fc
    .tuple(
      fc.constantFrom<EventKind>('response', 'response', 'invitation', 'authoritative', 'fallback', 'contact'),
      PERSON,
      fc.nat({ max: 1 }),
    )
    .map(([kind, person, request]) => emit(kind, person, request)),
  fc
    .tuple(QUEUE, fc.constantFrom<Pick>('all', 'all', 'oldest', 'newest', 'reversed', 'odd'))
    .map(([queue, pick]) => deliver(queue, pick)),
  fc.constantFrom<QueueBinding>('DISPATCH', 'DISPATCH', 'EVENTS').map((queue) => deliver(queue)),
  fc.tuple(QUEUE, fc.nat({ max: 5 })).map(([queue, index]) => redeliver(queue, index)),
  fc.constant(cron()),
  fc.constantFrom(1, 5, 31, 61, 125, 301, 601, 1801, 3601, 7201, 86_401, 90_001).map(advance),
  fc.tuple(fc.nat({ max: 20 }), fc.nat({ max: 1 })).map(([fault, which]) => providerFault(fault, which)),
  fc
    .tuple(fc.constantFrom<ProviderCondition>('revoked', 'quota', 'down'), fc.boolean(), fc.nat({ max: 1 }))
    .map(([condition, on, which]) => providerState(condition, on, which)),
  fc.integer({ min: 1, max: 8 }).map(failD1),
  fc
    .tuple(fc.constantFrom<QueueBinding>('DLQ', 'DISPATCH', 'EMAIL_EVENTS'), fc.boolean())
    .map(([queue, on]) => refuseQueue(queue, on)),
  fc
    .tuple(fc.nat({ max: 20 }), fc.constantFrom<ReportKind>('sent', 'delivered', 'delivered', 'bounced', 'complained'))
    .map(([index, kind]) => report(index, kind)),
  fc
    .tuple(fc.constantFrom<'replay' | 'discard'>('replay', 'replay', 'discard'), fc.nat({ max: 5 }))
    .map(([action, index]) => operate(action, index)),
  fc.tuple(PERSON, fc.constantFrom<'userId' | 'address'>('userId', 'address')).map(([person, by]) => erase(person, by)),
  PERSON.map(changeAddress),
  // Escalation and cancellation: a response or an invitation more often than the mix above gives them, so
  // that a run meets an item seen in time and an invitation withdrawn before or after it went.
  fc.tuple(fc.constantFrom<EventKind>('response', 'invitation'), PERSON).map(([kind, person]) => emit(kind, person)),
  // ... and an item reaches its feed (the in-app notification's dispatch) before it is looked at.
  fc.constantFrom<QueueBinding>('EVENTS', 'DISPATCH').map((queue) => deliver(queue)),
  fc.tuple(PERSON, fc.constantFrom<SeeWhich>('all', 'all', 'newest')).map(([person, which]) => see(person, which)),
  fc.tuple(PERSON, fc.constantFrom<SeeWhich>('all', 'newest')).map(([person, which]) => see(person, which)),
  PERSON.map(withdraw),
  fc
    .tuple(PERSON, fc.constantFrom<CancelOf>('invitation', 'invitation', 'response'))
    .map(([person, of]) => cancel(person, of)),
  fc.constant(cancelInFlight()),
  fc.tuple(PERSON, fc.constantFrom(true, true, false)).map(([person, open]) => inboxOpen(person, open)),
]

/**
 * The commands of a world with two transports: every command, and failover's
 * own as often — the first transport refuses for our configuration for a
 * while (a revoked key, a quota), or is down and its circuit opens, and comes
 * back; an answer of either is lost, a 5xx or an internal error; its probes
 * come due; a provider's delivery events are lost, or come after the wait for
 * them — and as often the traffic, deliveries, cron and clock that carry
 * them on (a run with little mail meets no failover).
 */
export const failoverArbitraries: fc.Arbitrary<Command>[] = [
  fc.oneof(
    // Every command, as a run with one transport meets them.
    { weight: 4, arbitrary: fc.oneof(...commandArbitraries) },
    // The first transport refuses for our configuration, or is down, for a while; the second now and then.
    {
      weight: 3,
      arbitrary: fc
        .tuple(fc.constantFrom<ProviderCondition>('revoked', 'quota', 'down', 'down'), fc.boolean())
        .map(([condition, on]) => providerState(condition, on)),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom<ProviderCondition>('revoked', 'quota', 'down'), fc.boolean())
        .map(([condition, on]) => providerState(condition, on, 1)),
    },
    // The answers that may have gone out: lost after it was taken (either), a 5xx (Resend), an internal error (the binding).
    {
      weight: 2,
      arbitrary: fc
        .tuple(fc.constantFrom(0, 0, 1, 2), fc.nat({ max: 1 }))
        .map(([fault, which]) => providerFault(fault, which)),
    },
    { weight: 1, arbitrary: fc.constant(advanceToProbe()) },
    { weight: 1, arbitrary: fc.nat({ max: 1 }).map(loseEvents) },
    { weight: 2, arbitrary: fc.constantFrom(0, 0, 1).map(takenSilently) },
    { weight: 1, arbitrary: fc.constantFrom(601, 1801).map(lateEvents) },
    // The mail that meets them, and what carries it on.
    {
      weight: 4,
      arbitrary: fc
        .tuple(fc.constantFrom<'invitation' | 'response'>('invitation', 'invitation', 'response'), PERSON)
        .map(([kind, person]) => mail(kind, person)),
    },
    { weight: 4, arbitrary: fc.constant(deliver('DISPATCH')) },
    { weight: 1, arbitrary: fc.constant(cron()) },
    { weight: 1, arbitrary: fc.constantFrom(31, 61, 601, 661).map(advance) },
  ),
]

/** SQLite's order of text (its bytes), which `localeCompare` is not. */
function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
