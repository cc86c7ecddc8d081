import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  getQueueResult,
  waitOnExecutionContext,
} from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { sign } from 'hono/jwt'
import { Webhook } from 'svix'
import { vi } from 'vitest'
import { dbBindingOf } from '../../src/d1/shard-names.ts'
import type { InboxFeed } from '../../src/inbox/inbox-feed.ts'
import type { NewItem } from '../../src/inbox/item.ts'
import { INBOX_AUDIENCE } from '../../src/inbox/token.ts'
import worker from '../../src/index.ts'
import { finalStatusSql } from '../../src/notifications/sql.ts'
import { allRows, dbOfUser, rowsIn, shardDbs, userInShard } from '../shards.ts'
import { BindingStandIn, type ProviderAnswer } from './binding-stand-in.ts'
import { ModelClock } from './clock.ts'
import { invitation } from './events.ts'
import { FaultyD1 } from './faulty-d1.ts'
import { ModelQueue, type QueuedMessage } from './model-queue.ts'
import { MODEL_RESEND_URL, ResendStandIn } from './resend-stand-in.ts'

export const ADMIN = 'test-admin-token-0123456789'
const INGEST = 'test-ingest-token-0123456789'
const WEBHOOK_SECRET = 'whsec_dGVzdC1yZXNlbmQtd2ViaG9vay1zZWNyZXQ='

/** The transports the model drives: Resend (idempotency keys, batches) and Cloudflare's binding (no key). */
export type ModelTransport = 'resend' | 'cloudflare'

/**
 * The transports of a world: one (EMAIL_TRANSPORT), or both in the order
 * EMAIL_TRANSPORTS lists them — provider failover.
 */
export type ModelTransports = ModelTransport | readonly ModelTransport[]

/** An email a provider accepted, whichever: its notification, recipient, time and the provider's id of it. */
export type ModelEmail = {
  transport: ModelTransport
  notificationId: string
  to: string
  at: number
  providerId: string
  headers: Record<string, string>
}

/** One request a provider answered: the notifications it carried, and what its answer told the Worker. */
export type ProviderRequest = { transport: ModelTransport; ids: string[]; at: number; answer: ProviderAnswer }

/**
 * A notification seen waiting `unknown` for the delivery events of the
 * transport it may have gone out through (`from`, its latest try's): to
 * leave it for the next (`failover`: the row's `failover_from` names the
 * transport it waits to leave), or to be sent again through it; and whether
 * `from` could be used then (`paused`: a pause or an open circuit in its shard).
 */
export type OutcomeWait = {
  id: string
  from: string
  failover: string | null
  paused: boolean
  until: string
  seenAt: number
}

/**
 * The cron's end of such a wait with no delivery event: the notification was
 * taken as not sent through `from` (its latest try's transport) and freed —
 * for the next transport (`failover`: the transport the row's reason says it
 * left), or to be sent again through `from`.
 */
export type Resolution = { id: string; from: string; failover: string | null; at: number }

/** What the model did to the delivery events of an email: lost them, or held them past a wait. */
export type EventFate = 'lost' | 'late'

/** The `emailKey`s of the emails a delivery event stored in D1 (in any shard) reports. */
export async function reportedEmails(): Promise<Set<string>> {
  const events = await allRows<{ provider: string; provider_message_id: string }>(
    'SELECT provider, provider_message_id FROM delivery_events',
  )
  return new Set(events.map((event) => emailKey({ transport: event.provider, providerId: event.provider_message_id })))
}

/** The key of an email in `World.eventFates`: its transport and the provider's id, without angle brackets. */
export function emailKey(email: { transport: string; providerId: string }): string {
  return `${email.transport}:${email.providerId.replace(/^<(.*)>$/, '$1')}`
}

/** A person of a model run: a recipient, with the address and name an erasure must remove. */
export type Person = {
  userId: string
  personId: string
  email: string
  name: string
  /** Whether their contact is in the replica (a PIN decision needs it; it may come late). */
  contact: boolean
  /** Responses come to them one by one (instant) rather than in digests: the throttle's recipients. */
  instant: boolean
  /** The version of their latest contact upsert. */
  contactVersion: number
  /** Addresses they had before their current one. */
  formerEmails?: string[]
  /** The model time they were erased at. */
  erasedAt?: number
  /** The invitations they were sent (invitation.created), by invitation id, oldest first. */
  invitations: string[]
  /**
   * An invitation withdrawn or cancelled before its invitation.created was
   * emitted (the sources' order is not the events' order): their next
   * invitation is this one.
   */
  nextInvitation?: string
  /** The responses to their projects (response.created), by response id, oldest first. */
  responses: string[]
  /** Whether their inbox is open on a page: each item is seen as soon as it reaches their feed. */
  watching?: boolean
}

/**
 * An email the provider accepted, with its notification as D1 held it at
 * that moment (read beside the Worker's request, before the answer went
 * back): what a cancellation or an escalation had decided by then.
 */
export type Acceptance = {
  notificationId: string
  /** Its place among the emails the provider accepted (`World.emails()`). */
  index: number
  /** Model time. */
  at: number
  /** The emails accepted before for the same notification (`emailKey`) that a delivery event stored by then reports. */
  reported: string[]
  /** The row, or undefined when no shard holds it any more. */
  row?: {
    status: string
    claimed_at: string | null
    maybe_sent_at: string | null
    cancellation_key: string | null
    cancelled_at: string | null
    /** When its shard recorded the cancellation of its key, if it did. */
    key_cancelled_at: string | null
    escalation_of: string | null
    escalated_at: string | null
    /** The transport its claim chose, and the one it waited to leave, if it did. */
    transport: string | null
    failover_from: string | null
  }
}

/** An operator's cancellation the Worker answered 200: the key was recorded in every shard and withdrawn. */
export type OperatorCancel = {
  key: string
  /** The model time it was asked at (the Worker's now), as ISO: nothing claimed or created from then on may go. */
  askedAt: string
  /** How many emails the provider had accepted when the answer came: those after it came later. */
  emailsBefore: number
  /** What the answer said of each notification of the key. */
  answered: { id: string; outcome: string; unconfirmedThrough: string[] }[]
}

/** The queues by binding. */
export type QueueBinding = 'EVENTS' | 'DISPATCH' | 'EMAIL_EVENTS' | 'DLQ'

const QUEUE_NAMES: Record<QueueBinding, string> = {
  EVENTS: 'notify-events',
  DISPATCH: 'notify-dispatch',
  EMAIL_EVENTS: 'notify-email-events',
  DLQ: 'notify-dlq',
}

/** `max_retries` of each consumer, as wrangler.toml sets them. */
const MAX_RETRIES: Record<QueueBinding, number> = { EVENTS: 3, DISPATCH: 10, EMAIL_EVENTS: 3, DLQ: 100 }

/** The tables a run starts without (the model's notifications are its own; the audit trail cannot be deleted). */
const RUN_TABLES = [
  'notifications',
  'send_batches',
  'sent_messages',
  'transport_pauses',
  'dead_letters',
  'delivery_events',
  'suppressions',
  'contacts',
  'preferences',
  'processed_events',
  'processed_marks',
  'throttle_windows',
  'reviewer_pool',
  // A key cancelled by an earlier run would hold nothing of this one (its invitation ids are new), but the
  // invariants read every cancellation as the run's own.
  'cancellations',
]

/** Whether a notify-events message carries an event that cancels a key (invitation.withdrawn). */
function cancelling(message: QueuedMessage): boolean {
  return JSON.stringify(message.body).includes('invitation.withdrawn')
}

/** How soon after the provider works again a pause must have ended: its longest probe interval and a probe's hold, and some. */
const PAUSE_ENDS_WITHIN_MS = 30 * 60_000

/**
 * How long, with two transports, one refusing while the other works, every
 * notification takes to end: the longest retry schedule of a send (about two
 * hours), a wait for delivery events before a failover, and some.
 */
const WHILE_ONE_REFUSES_MS = 3 * 3_600_000

/** The settings of the Worker under the model: the defaults, but for what the model needs to name. */
export const MODEL_VARS = {
  RESEND_REQUESTS_PER_SECOND: '500',
  DIGEST_WINDOW_SECONDS: '600',
  LOG_LEVEL: 'info',
  DISPATCH_LEASE_SECONDS: '120',
  STUCK_GRACE_SECONDS: '120',
  // ResponseCreated's own wait (vitest.config.ts sets the same): the model's advances of 1801 s and more end it.
  ESCALATION_AFTER_SECONDS: '1800',
} as const

/**
 * The kinds whose in-app channel a run turns on: ResponseCreated's email then
 * escalates (it waits for the item to go unseen), and InvitationCreated's item
 * is one a cancellation withdraws from the feed.
 */
export const IN_APP_KINDS = ['ResponseCreated', 'InvitationCreated'] as const

/** The inbox tokens the model signs live this long (at most a day, src/inbox/token.ts). */
const INBOX_TOKEN_SECONDS = 600

/**
 * The whole product as the lifecycle model drives it: the real Worker (its
 * consumers, cron and routes, called as Cloudflare calls them) on the real
 * local D1, KV and Durable Objects, with the model in charge of what it
 * cannot be in charge of otherwise — the clock, what each queue delivers and
 * when, the provider's answers, and which D1 call fails.
 */
export class World {
  /** The first (or only) transport. */
  readonly transport: ModelTransport
  /** Every configured transport, in order. */
  readonly transports: readonly ModelTransport[]
  /** Whether the world has two transports (EMAIL_TRANSPORTS): failover, circuits, probes picked by the claim. */
  readonly failover: boolean
  readonly clock: ModelClock
  readonly d1: FaultyD1
  readonly queues: Record<QueueBinding, ModelQueue>
  readonly resend: ResendStandIn
  readonly binding: BindingStandIn
  readonly env: Env
  readonly people: Person[] = []
  /** Every notification the run has seen, and those seen as members of a digest. */
  readonly seen = new Set<string>()
  readonly digested = new Set<string>()
  /** Emails an operator's replay may account for: the count of replays of each notification. */
  readonly replays = new Map<string, number>()
  /** Dead letters the model discarded (their notification's dead letter is resolved on purpose). */
  readonly discarded = new Set<string>()
  /** What the drain found stalled. */
  readonly stalls: string[] = []
  /** Every email the provider accepted, with its notification at that moment. */
  readonly accepted: Acceptance[] = []
  /** The operator's cancellations the Worker answered 200. */
  readonly cancels: OperatorCancel[] = []
  /** The invitation.withdrawn events emitted, by event id: the key each cancels. */
  readonly withdrawals = new Map<string, string>()
  /** Whether the run turns the in-app channel on for IN_APP_KINDS (off: the lifecycle before the inbox). */
  readonly inApp: boolean
  /** Every request a provider answered, in order. */
  readonly requests: ProviderRequest[] = []
  /** The waits for delivery events seen (after each delivery of notify-dispatch). */
  readonly waits: OutcomeWait[] = []
  /** The cron's ends of those waits with no delivery event (seen after each cron). */
  readonly resolutions: Resolution[] = []
  /** The emails whose delivery events the model lost or held back, by `emailKey`. */
  readonly eventFates = new Map<string, EventFate>()
  /** The model times of each operator's replay of a notification. */
  readonly replayedAt = new Map<string, number[]>()
  /** Every email either provider accepted, in the order they accepted them. */
  readonly #emails: ModelEmail[] = []
  /** Resend's webhooks not yet taken by the route (failover worlds: Resend reports every email it accepted). */
  readonly #webhooks: ModelEmail[] = []
  /** What happened, a line a step, for the report of a failing run. */
  readonly trace: string[] = []
  readonly run: string
  /**
   * The shard of each person `setup` adds, by index (modulo the databases):
   * placed, not drawn from a random user id, so that a run replays with the
   * same persons in the same shards. Absent: person i in shard i.
   */
  readonly #shards: readonly number[]
  #started = false

  constructor(
    transports: ModelTransports,
    options: { windowHours?: number; vars?: Record<string, string>; inApp?: boolean; shards?: readonly number[] } = {},
  ) {
    this.#shards = options.shards ?? []
    this.transports = typeof transports === 'string' ? [transports] : [...transports]
    this.transport = this.transports[0] as ModelTransport
    this.failover = this.transports.length > 1
    this.inApp = options.inApp ?? true
    this.run = crypto.randomUUID().slice(0, 8)
    this.clock = new ModelClock(new Date('2027-03-01T09:00:00Z'))
    this.d1 = new FaultyD1(shardDbs())
    const now = () => this.clock.now
    this.queues = {
      EVENTS: new ModelQueue(QUEUE_NAMES.EVENTS, MAX_RETRIES.EVENTS, now),
      DISPATCH: new ModelQueue(QUEUE_NAMES.DISPATCH, MAX_RETRIES.DISPATCH, now),
      EMAIL_EVENTS: new ModelQueue(QUEUE_NAMES.EMAIL_EVENTS, MAX_RETRIES.EMAIL_EVENTS, now),
      DLQ: new ModelQueue(QUEUE_NAMES.DLQ, MAX_RETRIES.DLQ, now),
    }
    for (const name of ['EVENTS', 'DISPATCH', 'EMAIL_EVENTS'] as const)
      this.queues[name].deadLetterQueue = this.queues.DLQ
    const apiKey = `re_model_${this.run}_key_0123456789`
    this.resend = new ResendStandIn(apiKey, {
      ...(options.windowHours ? { windowMs: options.windowHours * 3_600_000 } : {}),
    })
    this.binding = new BindingStandIn()
    this.resend.onAccept = (emails) => {
      const taken = emails.map(
        (email): ModelEmail => ({
          transport: 'resend',
          notificationId: email.notificationId,
          to: email.to,
          at: email.at,
          providerId: email.id,
          headers: email.headers,
        }),
      )
      this.#emails.push(...taken)
      // With two transports, Resend's webhook reports each email it accepted (email.sent), as Cloudflare's
      // event subscription does: an email that waits to fail over waits for them.
      if (this.failover && this.#silenced.delete('resend')) this.#unreported(taken)
      else if (this.failover) this.#webhooks.push(...taken)
      return this.#accepted(emails.map((email) => email.notificationId))
    }
    // Cloudflare's event subscription reports every message the binding took.
    this.binding.onAccept = async (email) => {
      const taken: ModelEmail = {
        transport: 'cloudflare',
        notificationId: email.notificationId,
        to: email.to,
        at: email.at,
        providerId: email.messageId,
        headers: {},
      }
      this.#emails.push(taken)
      await this.#accepted([email.notificationId])
      if (this.#silenced.delete('cloudflare')) this.#unreported([taken])
      else await this.cloudflareEvent('delivered', email.messageId, email.to)
    }
    this.resend.onRequest = (ids) => this.#inFlight(ids)
    this.binding.onRequest = (ids) => this.#inFlight(ids)
    this.resend.onAnswer = (ids, answer) => this.requests.push({ transport: 'resend', ids, at: this.clock.now, answer })
    this.binding.onAnswer = (ids, answer) =>
      this.requests.push({ transport: 'cloudflare', ids, at: this.clock.now, answer })
    this.env = {
      ...env,
      ...MODEL_VARS,
      EMAIL_TRANSPORT: this.transport,
      ...(this.failover ? { EMAIL_TRANSPORTS: this.transports.join(',') } : {}),
      RESEND_API_KEY: apiKey,
      RESEND_API_URL: MODEL_RESEND_URL,
      ...options.vars,
      // Each D1 shard (one database in the `worker` project, two in `two databases`), faults and all.
      ...Object.fromEntries(this.d1.dbs.map((db, shard) => [dbBindingOf(shard), db])),
      EVENTS: this.queues.EVENTS,
      DISPATCH: this.queues.DISPATCH,
      EMAIL_EVENTS: this.queues.EMAIL_EVENTS,
      DLQ: this.queues.DLQ,
      EMAIL: this.binding,
      // The feeds, as the Worker reaches them; an item that arrives is seen at once by an open page.
      INBOX: this.#watched(env.INBOX),
    } as unknown as Env
    const realFetch = globalThis.fetch
    vi.stubGlobal('fetch', (input: RequestInfo | URL, init?: RequestInit) => {
      const request = new Request(input, init)
      if (request.url.startsWith(MODEL_RESEND_URL)) return this.resend.fetch(request)
      return realFetch(request)
    })
  }

  /** Empties the tables a run owns, so that nothing of an earlier run is sent, probed or released by this one. */
  async start(): Promise<void> {
    if (this.#started) return
    this.#started = true
    for (const db of shardDbs()) await db.batch(RUN_TABLES.map((table) => db.prepare(`DELETE FROM ${table}`)))
  }

  /**
   * A run's beginning: its tables empty, and its people — one who takes
   * responses one by one (the throttle's recipient) and has a contact, one
   * whose contact has not reached the replica yet, one in between.
   */
  async setup(): Promise<void> {
    await this.start()
    const count = shardDbs().length
    const shardOf = (index: number) => this.#shards[index] ?? index
    const people = [
      this.addPerson({ contact: true, instant: true }, await userInShard(shardOf(0), count)),
      this.addPerson({ contact: false, instant: false }, await userInShard(shardOf(1), count)),
      this.addPerson({ contact: true, instant: false }, await userInShard(shardOf(2), count)),
    ]
    // Each kind's in-app channel, on (or off) for every urgency, through the operator's route: a response's
    // email then escalates, an invitation's item goes to the feed.
    for (const kind of IN_APP_KINDS) {
      const answer = await this.operator('PUT', `/v1/channel-policies/${kind}/in-app`, { enabled: this.inApp })
      if (!answer.ok) throw new Error(`the channel policy was refused: ${answer.status} ${await answer.text()}`)
    }
    for (const person of people) {
      if (person.contact) await this.#insertContact(person)
      if (person.instant) {
        const answer = await this.operator('PUT', `/v1/preferences/${person.userId}`, {
          preferences: [{ kind: 'ResponseCreated', channel: 'email', enabled: true, mode: 'instant' }],
        })
        if (!answer.ok) throw new Error(`the preference was refused: ${answer.status} ${await answer.text()}`)
      }
    }
  }

  /** The person's contact, in the replica of their shard (as a run begins with it). */
  async #insertContact(person: Person): Promise<void> {
    await (await dbOfUser(person.userId))
      .prepare(
        `INSERT INTO contacts (user_id, email, locale, time_zone, display_name, version, updated_at)
         VALUES (?1, ?2, 'ru-RU', 'Europe/Moscow', ?3, 1, ?4)`,
      )
      .bind(person.userId, person.email, person.name, this.clock.iso)
      .run()
  }

  readonly #duringNextSend: ((notificationIds: string[]) => Promise<boolean>)[] = []

  /**
   * Has `act` run while a provider request is in flight — the Worker has
   * claimed what it sends and waits for the answer (an operator's
   * cancellation racing a send) — with the notifications the request carries:
   * at the next request `act` answers true for, one act per request, in order.
   */
  duringNextSend(act: (notificationIds: string[]) => Promise<boolean>): void {
    this.#duringNextSend.push(act)
  }

  async #inFlight(notificationIds: string[]): Promise<void> {
    const act = this.#duringNextSend[0]
    if (act && (await act(notificationIds))) this.#duringNextSend.shift()
  }

  /**
   * Records the emails the provider just accepted with their notifications
   * as D1 holds them now — the Worker's send is waiting for the answer, so
   * what its claim and a cancellation wrote is what they were when the email
   * went out. Read from the real D1, not through the model's faults: the
   * model's reading is no call of the Worker's.
   */
  async #accepted(ids: string[]): Promise<void> {
    // Their places and time before the read: another send may be accepted while it runs.
    const first = this.emails().length - ids.length
    const at = this.clock.now
    const rows = await allRows<NonNullable<Acceptance['row']> & { id: string }>(
      `SELECT n.id, n.status, n.claimed_at, n.maybe_sent_at, n.cancellation_key, n.cancelled_at,
         c.cancelled_at AS key_cancelled_at, n.escalation_of, n.escalated_at, n.transport, n.failover_from
       FROM notifications n LEFT JOIN cancellations c ON c.key = n.cancellation_key
       WHERE n.id IN (SELECT value FROM json_each(?1))`,
      JSON.stringify(ids),
    )
    const byId = new Map(rows.map(({ id, ...row }) => [id, row]))
    // The delivery events stored by then about an email accepted before for one of them.
    const before = this.emails()
      .slice(0, first)
      .filter((email) => ids.includes(email.notificationId))
    const events =
      before.length === 0
        ? []
        : await allRows<{ provider: string; provider_message_id: string }>(
            `SELECT provider, provider_message_id FROM delivery_events
             WHERE provider_message_id IN (SELECT value FROM json_each(?1))`,
            JSON.stringify(before.flatMap((email) => [email.providerId, email.providerId.replace(/^<(.*)>$/, '$1')])),
          )
    const reported = new Set(
      events.map((event) => emailKey({ transport: event.provider, providerId: event.provider_message_id })),
    )
    ids.forEach((notificationId, offset) => {
      const row = byId.get(notificationId)
      const earlier = before
        .filter((email) => email.notificationId === notificationId && reported.has(emailKey(email)))
        .map(emailKey)
      this.accepted.push({ notificationId, index: first + offset, at, reported: earlier, ...(row ? { row } : {}) })
    })
  }

  /**
   * The clock moves on. Through Cloudflare's binding, whose lost answers wait
   * for its delivery events, those events are taken to reach their queue
   * within a minute: the clock does not pass one undelivered by more. With
   * two transports, so are Resend's webhooks (an email that may have gone
   * out through one waits for its events before the other sends it): only
   * `lateEvents` and `loseEvents` keep them from coming in time.
   */
  async advance(seconds: number): Promise<void> {
    const target = this.clock.now + seconds * 1000
    if (!this.transports.includes('cloudflare') && !this.failover) return this.clock.set(target)
    while (this.clock.now < target) {
      await this.postWebhooks()
      if (this.queues.EMAIL_EVENTS.visible().length > 0) await this.deliver('EMAIL_EVENTS')
      this.clock.set(Math.min(target, this.clock.now + 60_000))
    }
  }

  /**
   * Resend posts the webhooks of the emails it accepted (failover worlds):
   * each through the route, kept until the route takes it (Resend retries a
   * refusal).
   */
  async postWebhooks(): Promise<void> {
    for (const email of [...this.#webhooks]) {
      const status = await this.resendWebhook(
        { id: email.providerId, to: email.to, headers: email.headers },
        'email.sent',
      )
      if (status >= 200 && status < 300) this.#webhooks.splice(this.#webhooks.indexOf(email), 1)
      else this.note(`  Resend's webhook of ${email.notificationId} was answered ${status}: it comes again`)
    }
  }

  /** The transports whose next accepted request is reported by no delivery event (`takenSilently`). */
  readonly #silenced = new Set<ModelTransport>()

  /**
   * A provider's next request is taken, its answer lost, and no delivery
   * event ever reports it (failover worlds): one outage swallowed both.
   */
  takenSilently(transport: ModelTransport): void {
    if (transport === 'resend') this.resend.script.push('lose-after-accept')
    else this.binding.script.push('lose-after-accept')
    this.#silenced.add(transport)
  }

  /** Emails no delivery event will report. */
  #unreported(emails: readonly ModelEmail[]): void {
    for (const email of emails) this.eventFates.set(emailKey(email), 'lost')
    this.note(`  no event will report ${emails.map((email) => email.notificationId).join(', ')}`)
  }

  /**
   * The delivery events of a provider that have not reached the Worker are
   * lost: Cloudflare's on notify-email-events, Resend's still to be posted
   * or on the queue. Their emails are remembered as such (`eventFates`).
   */
  loseEvents(transport: ModelTransport): void {
    const lost: string[] = []
    if (transport === 'resend') {
      for (const email of this.#webhooks.splice(0)) lost.push(emailKey(email))
    }
    for (const message of [...this.queues.EMAIL_EVENTS.waiting]) {
      const body = message.body as {
        type?: string
        payload?: { messageId?: string }
        notifyEdgeResendEvent?: number
        event?: { data?: { email_id?: string } }
      }
      const id =
        transport === 'cloudflare' && body.type?.startsWith('cf.email')
          ? body.payload?.messageId
          : transport === 'resend' && body.notifyEdgeResendEvent
            ? body.event?.data?.email_id
            : undefined
      if (id === undefined) continue
      this.queues.EMAIL_EVENTS.lose(message)
      lost.push(emailKey({ transport, providerId: id }))
    }
    for (const key of lost) this.eventFates.set(key, 'lost')
    this.note(`  ${lost.length} event(s) of ${transport} lost`)
  }

  /**
   * The clock moves on with no delivery event reaching the Worker: those of
   * every email accepted so far that no event has reported yet come late
   * (`eventFates`), after whatever wait for them ended meanwhile.
   */
  async lateEvents(seconds: number): Promise<void> {
    const reported = await reportedEmails()
    let late = 0
    for (const email of this.#emails) {
      const key = emailKey(email)
      if (reported.has(key) || this.eventFates.has(key)) continue
      this.eventFates.set(key, 'late')
      late += 1
    }
    this.note(`  the events of ${late} email(s) come late`)
    this.clock.set(this.clock.now + seconds * 1000)
  }

  /** The real clock and fetch again. */
  close(): void {
    this.clock.stop()
    vi.unstubAllGlobals()
  }

  note(line: string): void {
    this.trace.push(`[${this.clock.iso}] ${line}`)
  }

  readonly #decisions = new Map<string, unknown>()

  /**
   * A decision's event, made once: a producer announces a decision once per
   * source, so emitting it again sends the same event again (a source's
   * redelivery, which deduplication absorbs), never a second event.
   */
  decision(key: string, make: () => unknown): unknown {
    if (!this.#decisions.has(key)) this.#decisions.set(key, make())
    return this.#decisions.get(key)
  }

  /** Adds a person; their address has letters in upper case, as addresses arrive. */
  addPerson(options: { contact: boolean; instant: boolean }, userId: string): Person {
    const index = this.people.length
    const person: Person = {
      userId,
      personId: crypto.randomUUID(),
      email: `Person${index}.${this.run}@Model-Example.com`,
      name: `Модель${index} Персона${this.run}`,
      contactVersion: 1,
      invitations: [],
      responses: [],
      ...options,
    }
    this.people.push(person)
    return person
  }

  /** Sends a request to the Worker's fetch handler, as Cloudflare would, with the run's env. */
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const ctx = createExecutionContext()
    const response = await worker.fetch(
      new Request(`https://notify-edge.example.workers.dev${path}`, init),
      this.env,
      ctx,
    )
    await waitOnExecutionContext(ctx)
    return response
  }

  /** An operator's call: admin token, JSON. */
  async operator(method: string, path: string, body?: unknown): Promise<Response> {
    return this.fetch(path, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
  }

  /**
   * A call of a person's inbox, as their page makes it: with an inbox token
   * their host signed (HS256, INBOX_TOKEN_SECRET) naming them, on the model's
   * clock.
   */
  async inbox(userId: string, method: string, path: string, body?: unknown): Promise<Response> {
    const token = await sign(
      { sub: userId, aud: INBOX_AUDIENCE, exp: Math.floor(this.clock.now / 1000) + INBOX_TOKEN_SECONDS },
      this.env.INBOX_TOKEN_SECRET,
      'HS256',
    )
    return this.fetch(`/v1/inbox${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
  }

  /** POST /v1/ingest, as the bridge does; the events land on the model's notify-events. */
  async ingest(events: unknown[]): Promise<number> {
    const response = await this.fetch('/v1/ingest', {
      method: 'POST',
      headers: { authorization: `Bearer ${INGEST}`, 'content-type': 'application/json' },
      body: JSON.stringify({ events }),
    })
    return response.status
  }

  /**
   * One consumer invocation: the visible messages of a queue picked by
   * `pick` (all, by default, at most 100), delivered as one batch; each
   * message ends as the consumer settled it (an explicit ack, a retry with
   * its delay), and one left unsettled by a consumer that returned is acked,
   * as Cloudflare does.
   */
  async deliver(
    binding: QueueBinding,
    pick: (visible: QueuedMessage[]) => QueuedMessage[] = (all) => all,
  ): Promise<number> {
    const queue = this.queues[binding]
    const chosen = pick(queue.visible()).slice(0, 100)
    if (chosen.length === 0) return 0
    // A cancellation is applied a millisecond apart from every claim and write before it: the Worker writes
    // times to the millisecond, and the invariants order what came after a cancellation by them.
    if (binding === 'EVENTS' && chosen.some(cancelling)) this.clock.set(this.clock.now + 1)
    queue.take(chosen)
    // The pauses each shard's claim will read: a wait it begins was for a transport paused then.
    const before = binding === 'DISPATCH' ? await this.#pausedTransports() : []
    const batch = createMessageBatch(
      queue.name,
      chosen.map((message) => ({
        id: message.id,
        timestamp: new Date(message.sentAt),
        attempts: message.attempts,
        body: message.body,
      })),
    )
    const retries = batch.messages.map((message) => vi.spyOn(message, 'retry'))
    const ctx = createExecutionContext()
    await worker.queue(batch, this.env)
    const result = await getQueueResult(batch, ctx)
    chosen.forEach((message, index) => {
      const call = retries[index]?.mock.calls[0]
      const acked = result.ackAll || result.explicitAcks.includes(message.id)
      if (call && !acked) queue.retry(message, call[0]?.delaySeconds ?? 0)
      else if (result.retryBatch.retry && !acked) queue.retry(message, result.retryBatch.delaySeconds ?? 0)
      else queue.ack(message)
    })
    if (binding === 'DISPATCH') await this.#observeWaits(before)
    return chosen.length
  }

  /** The notifications waiting `unknown` for delivery events now, each wait kept once. */
  async #observeWaits(pausedBefore: readonly Set<string>[]): Promise<void> {
    const pauses: { transport: string; code: string; since: string }[] = []
    for (const [shard, db] of shardDbs().entries()) {
      const [rows, paused] = await db.batch<Record<string, unknown>>([
        db.prepare("SELECT id, failover_from, transport, scheduled_at FROM notifications WHERE status = 'unknown'"),
        db.prepare('SELECT transport, code, since FROM transport_pauses'),
      ])
      const here = (paused?.results ?? []) as { transport: string; code: string; since: string }[]
      pauses.push(...here)
      for (const row of (rows?.results ?? []) as {
        id: string
        failover_from: string | null
        transport: string | null
        scheduled_at: string
      }[]) {
        // Whose events it awaits: its latest try's transport.
        const from = row.transport ?? this.transport
        const known = this.waits.some(
          (wait) => wait.id === row.id && wait.until === row.scheduled_at && wait.failover === row.failover_from,
        )
        if (known) continue
        this.waits.push({
          id: row.id,
          from,
          failover: row.failover_from,
          // Paused when the claim read it (a probe of the same batch may have ended the pause since), or now.
          paused: pausedBefore[shard]?.has(from) === true || here.some((pause) => pause.transport === from),
          until: row.scheduled_at,
          seenAt: this.clock.now,
        })
      }
    }
    const now = new Set(pauses.map((pause) => `${pause.transport} ${pause.code} since ${pause.since}`))
    for (const pause of now) if (!this.#pauses.has(pause)) this.pausesSeen.push(pause)
    this.#pauses = now
  }

  /** The transports paused (or with an open circuit) in each shard now. */
  async #pausedTransports(): Promise<Set<string>[]> {
    return Promise.all(
      shardDbs().map(
        async (db) =>
          new Set(
            (await rowsIn<{ transport: string }>(db, 'SELECT transport FROM transport_pauses')).map(
              (row) => row.transport,
            ),
          ),
      ),
    )
  }

  /** The pauses (and open circuits) seen begin, after deliveries of notify-dispatch: what a run reached. */
  readonly pausesSeen: string[] = []
  #pauses = new Set<string>()

  /**
   * The waits this cron ended with no delivery event: the notifications
   * taken as not sent through the transport whose events they awaited (their
   * latest try's, `transport`), and freed — for the next transport (the
   * failover's reason), or to be sent again through it.
   */
  async #observeResolutions(): Promise<void> {
    const rows = await allRows<{ id: string; transport: string | null; status_reason: string }>(
      `SELECT id, transport, status_reason FROM notifications
       WHERE updated_at = ?1 AND status_reason LIKE 'no delivery event%'`,
      this.clock.iso,
    )
    for (const row of rows) {
      const at = this.clock.now
      if (this.resolutions.some((known) => known.id === row.id && known.at === at)) continue
      const failover = /^no delivery event came from (\S+): sent through the next transport/.exec(
        row.status_reason,
      )?.[1]
      this.resolutions.push({ id: row.id, from: row.transport ?? this.transport, failover: failover ?? null, at })
      this.note(`  ${row.id}: ${row.status_reason}`)
    }
  }

  /**
   * The feeds' namespace as the Worker sees it, but that an item added to
   * the feed of a person whose inbox is open (`watching`) is marked seen
   * right after, before the Worker goes on: their page hears of it over its
   * socket and marks it, through the inbox route.
   */
  #watched(feeds: Env['INBOX']): Env['INBOX'] {
    const feed = (userId: string, stub: DurableObjectStub<InboxFeed>) =>
      new Proxy(stub, {
        get: (target, property) => {
          if (property !== 'add') return Reflect.get(target, property)
          return async (item: NewItem) => {
            const added = await target.add(item)
            if (added.added) await this.#arrived(userId, item.notificationId)
            return added
          }
        },
      })
    return new Proxy(feeds, {
      get: (target, property) => {
        if (property === 'getByName') return (name: string) => feed(name, target.getByName(name))
        const value = Reflect.get(target, property)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
  }

  /** An item reached a feed: a person whose inbox is open sees it. */
  async #arrived(userId: string, notificationId: string): Promise<void> {
    const person = this.people.find((candidate) => candidate.userId === userId)
    if (!person?.watching || person.erasedAt !== undefined) return
    const answer = await this.inbox(userId, 'POST', '/seen', { ids: [notificationId] })
    this.note(`  person ${this.people.indexOf(person)}'s open inbox sees ${notificationId}: ${answer.status}`)
  }

  /** The cron trigger, as of now. */
  async cron(): Promise<void> {
    const ctx = createExecutionContext()
    try {
      await worker.scheduled(
        createScheduledController({ scheduledTime: new Date(this.clock.now), cron: '* * * * *' }),
        this.env,
      )
    } catch (error) {
      // A failed step is thrown so that Cloudflare shows the run as failed; the next run goes on.
      this.note(`cron failed: ${(error as Error).message}`)
    }
    await waitOnExecutionContext(ctx)
    await this.#observeResolutions()
  }

  /** A signed Resend webhook for an accepted email, through the route as Resend posts it. */
  async resendWebhook(
    email: { id: string; to: string; headers: Record<string, string> },
    type: string,
    data: Record<string, unknown> = {},
  ): Promise<number> {
    const at = new Date(this.clock.now)
    const payload = JSON.stringify({
      type,
      created_at: at.toISOString(),
      data: {
        email_id: email.id,
        created_at: at.toISOString(),
        from: 'ArtHunt <notifications@notify-edge.example>',
        to: [email.to],
        subject: 'a notification',
        headers: Object.entries(email.headers).map(([name, value]) => ({ name, value })),
        ...data,
      },
    })
    const svixId = `msg_${crypto.randomUUID().replaceAll('-', '')}`
    const signature = new Webhook(WEBHOOK_SECRET).sign(svixId, at, payload)
    const response = await this.fetch('/v1/webhooks/resend', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'svix-id': svixId,
        'svix-timestamp': String(Math.floor(at.getTime() / 1000)),
        'svix-signature': signature,
      },
      body: payload,
    })
    return response.status
  }

  /** A Cloudflare Email Sending event, as its event subscription puts it on notify-email-events. */
  async cloudflareEvent(
    kind: 'delivered' | 'bounced' | 'complained',
    messageId: string,
    recipient: string,
  ): Promise<void> {
    const bounce =
      kind === 'bounced'
        ? {
            delivery: { status: 'bounced', smtpStatusCode: '550', smtpEnhancedStatusCode: '5.1.1' },
            bounce: { type: 'hard', classification: 'permanent_failure', reason: `550 5.1.1 <${recipient}> unknown` },
          }
        : { delivery: { status: kind } }
    this.queues.EMAIL_EVENTS.put([
      {
        body: {
          type: `cf.email.sending.message.${kind}`,
          source: { type: 'email.sending', zoneId: '023e105f4ecef8ad9ca31a8372d0c353', domain: 'notify-edge.example' },
          payload: {
            eventId: crypto.randomUUID(),
            messageId: messageId.replace(/^<|>$/g, ''),
            sender: 'notifications@notify-edge.example',
            recipient,
            terminal: true,
            ...bounce,
          },
          metadata: {
            accountId: 'f9f79265f388666de8122cfb508d7776',
            eventSubscriptionId: '1830c4bb612e43c3af7f4cada31fbf3f',
            eventSchemaVersion: 1,
            eventTimestamp: new Date(this.clock.now).toISOString(),
          },
        },
      },
    ])
  }

  /** Every email the providers accepted, both of them, in the order they accepted them: its notification, recipient and time. */
  emails(): readonly ModelEmail[] {
    return this.#emails
  }

  /**
   * Lets the world run on with every fault healed until nothing is left to
   * do: each queue delivered, the cron run, the clock moved to the next time
   * something is due (a message's delay, a row's time, a probe, the grace of
   * the cron's search), at most `rounds` times. A notification that is still
   * not final after that has stalled. With two transports, the world first
   * runs on with the first one still refusing (`#whileTheFirstRefuses`), and a
   * pause left when nothing else is to be sent is probed with new mail
   * (`#newMail`): a paused transport comes back by a probe the claim picks.
   */
  async drain(rounds = 400): Promise<void> {
    if (this.failover) await this.#whileTheFirstRefuses()
    this.heal()
    // A pause's next probe may be later than now (a quota's reset): the bound runs from then.
    const probes = await allRows<{ probe_at: string }>('SELECT probe_at FROM transport_pauses')
    const healedAt = Math.max(this.clock.now, ...probes.map((pause) => Date.parse(pause.probe_at)))
    let newMail = 0
    for (let round = 0; round < rounds; round += 1) {
      const { next, waiting, pause } = await this.#round()
      if (next === undefined && !waiting && !pause) return
      // With two transports, a paused one comes back by a probe the claim picks among new mail while the
      // other carries it: when its probe is due and none is out, the world sends more, one email at a time.
      if (pause && this.failover && newMail < 10 && (await this.#newMail())) {
        newMail += 1
        continue
      }
      // Probes come at most 10 minutes apart, and one that never reports back is replaced after two leases.
      if (pause && this.clock.now - healedAt > PAUSE_ENDS_WITHIN_MS) {
        const minutes = Math.round((this.clock.now - healedAt) / 60_000)
        this.stalls.push(`no stall: the transport is still paused ${minutes} min after its probe was due`)
        return
      }
      this.#moveOn(next, pause)
    }
  }

  /**
   * With two transports, before all is healed: every fault healed but the
   * first transport, which refuses for our configuration (its key revoked,
   * its sender not verified) for as long as it takes. The second carries the
   * mail meanwhile — what may have gone out through the first after the wait
   * for its events — so every notification ends (but one waiting for its
   * contact, which the drain's own wait reaches) within WHILE_ONE_REFUSES_MS:
   * one left open then was lost while a transport worked.
   */
  async #whileTheFirstRefuses(): Promise<void> {
    this.heal()
    const first = this.transport
    if (first === 'resend') this.resend.revoked = true
    else this.binding.unverified = true
    this.note(`drain: every fault healed but ${first}, which refuses from now on`)
    const began = this.clock.now
    const open = () =>
      allRows<{ id: string; status: string; status_reason: string | null }>(
        `SELECT id, status, status_reason FROM notifications
         WHERE NOT ${finalStatusSql()} AND status <> 'awaiting-contact' ORDER BY scheduled_at`,
      )
    while (this.clock.now - began <= WHILE_ONE_REFUSES_MS) {
      const { next, pause } = await this.#round()
      if ((await open()).length === 0) return
      this.#moveOn(next, pause)
    }
    const minutes = Math.round((this.clock.now - began) / 60_000)
    for (const row of await open()) {
      this.stalls.push(
        `no stall while one transport works: notification ${row.id} is still ${row.status} (${row.status_reason}) ${minutes} min after ${first} began refusing`,
      )
    }
  }

  /** The earliest due time of a notification not final, if any. */
  async #nextDue(): Promise<string | undefined> {
    const open = await allRows<{ scheduled_at: string }>(
      `SELECT scheduled_at FROM notifications WHERE NOT ${finalStatusSql()} ORDER BY scheduled_at LIMIT 1`,
    )
    return open.map((row) => row.scheduled_at).sort()[0]
  }

  /**
   * One round of the drain: Resend's webhooks posted, each queue delivered,
   * the cron run; then what is still to come — the earliest due time of a
   * notification not final (every shard's), whether a queue or a webhook
   * waits, a pause in any shard.
   */
  async #round(): Promise<{ next: string | undefined; waiting: boolean; pause: { probe_at: string } | undefined }> {
    await this.postWebhooks()
    for (const binding of ['EVENTS', 'DISPATCH', 'EMAIL_EVENTS', 'DLQ'] as const) {
      for (let step = 0; step < 20 && (await this.deliver(binding)) > 0; step += 1);
    }
    await this.cron()
    const next = await this.#nextDue()
    const waiting = Object.values(this.queues).some((queue) => queue.waiting.length > 0) || this.#webhooks.length > 0
    const pause = (await allRows<{ probe_at: string }>('SELECT probe_at FROM transport_pauses LIMIT 1'))[0]
    return { next, waiting, pause }
  }

  /**
   * The clock to the next thing due: at least a minute, as the cron runs, at
   * most an hour. A message visible now was sent after the round delivered
   * its queue (by the cron): it is due at the next minute, as a real queue
   * would deliver it within moments. Leaving it out let the clock jump an
   * hour each time the cron enqueued something, and a notification sent
   * through the cron's hands three times in a row (an unknown outcome sent
   * again, its failover wait, its send through the next transport) took
   * three hours where it takes one.
   */
  #moveOn(next: string | undefined, pause: { probe_at: string } | undefined): void {
    const candidates = [
      ...Object.values(this.queues).map((queue) => {
        const at = queue.nextVisibleAt()
        return at === undefined ? undefined : Math.max(at, this.clock.now + 60_000)
      }),
      next ? Date.parse(next) + 121_000 : undefined,
      pause ? Date.parse(pause.probe_at) : undefined,
    ].filter((at): at is number => at !== undefined && at > this.clock.now)
    this.clock.set(Math.max(this.clock.now + 60_000, Math.min(...candidates, this.clock.now + 3_600_000)))
  }

  /**
   * An invitation to a new person (with a contact) in a shard where a
   * transport's probe is due, with no probe out, while another is usable:
   * the email the claim names as the probe. False when no shard has such a pause.
   */
  async #newMail(): Promise<boolean> {
    const dbs = shardDbs()
    for (const [shard, db] of dbs.entries()) {
      const pauses = await rowsIn<{ probe_at: string; probe_id: string | null }>(
        db,
        `SELECT p.probe_at, n.id AS probe_id FROM transport_pauses p
         LEFT JOIN notifications n ON n.id = p.probe_id AND n.status IN ('pending', 'sending', 'paused')`,
      )
      const due = pauses.some((pause) => Date.parse(pause.probe_at) <= this.clock.now && pause.probe_id === null)
      if (!due || pauses.length >= this.transports.length) continue
      const person = this.addPerson({ contact: true, instant: false }, await userInShard(shard, dbs.length))
      await this.#insertContact(person)
      this.note(`drain: new mail to person ${this.people.indexOf(person)}, for the probe of a paused transport`)
      const invitationId = crypto.randomUUID()
      person.invitations.push(invitationId)
      const status = await this.ingest([invitation(person, invitationId)])
      if (status !== 202) this.note(`  ingest answered ${status}`)
      return true
    }
    return false
  }

  /** Heals every fault the model injected: the provider works, the queues take sends, D1 answers. */
  heal(): void {
    this.resend.script.length = 0
    this.resend.revoked = false
    this.resend.quota = false
    this.resend.down = false
    this.binding.script.length = 0
    this.binding.unverified = false
    this.binding.dailyLimit = false
    this.binding.down = false
    this.#silenced.clear()
    for (const queue of Object.values(this.queues)) queue.refusing = false
    this.d1.heal()
  }
}
