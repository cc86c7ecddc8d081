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
import { allRows, dbOfUser, shardDbs } from '../shards.ts'
import { BindingStandIn } from './binding-stand-in.ts'
import { ModelClock } from './clock.ts'
import { FaultyD1 } from './faulty-d1.ts'
import { ModelQueue, type QueuedMessage } from './model-queue.ts'
import { MODEL_RESEND_URL, ResendStandIn } from './resend-stand-in.ts'

export const ADMIN = 'test-admin-token-0123456789'
const INGEST = 'test-ingest-token-0123456789'
const WEBHOOK_SECRET = 'whsec_dGVzdC1yZXNlbmQtd2ViaG9vay1zZWNyZXQ='

/** The transports the model drives: Resend (idempotency keys, batches) and Cloudflare's binding (no key). */
export type ModelTransport = 'resend' | 'cloudflare'

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
  }
}

/** An operator's cancellation the Worker answered 200: the key was recorded in every shard and withdrawn. */
export type OperatorCancel = {
  key: string
  /** The model time it was asked at (the Worker's now), as ISO: nothing claimed or created from then on may go. */
  askedAt: string
  /** How many emails the provider had accepted when the answer came: those after it came later. */
  emailsBefore: number
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
  readonly transport: ModelTransport
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
  /** What happened, a line a step, for the report of a failing run. */
  readonly trace: string[] = []
  readonly run: string
  #started = false

  constructor(
    transport: ModelTransport,
    options: { windowHours?: number; vars?: Record<string, string>; inApp?: boolean } = {},
  ) {
    this.transport = transport
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
    this.resend.onAccept = (emails) => this.#accepted(emails.map((email) => email.notificationId))
    this.resend.onRequest = (ids) => this.#inFlight(ids)
    this.binding.onRequest = (ids) => this.#inFlight(ids)
    this.env = {
      ...env,
      ...MODEL_VARS,
      EMAIL_TRANSPORT: transport,
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
    const people = [
      this.addPerson({ contact: true, instant: true }),
      this.addPerson({ contact: false, instant: false }),
      this.addPerson({ contact: true, instant: false }),
    ]
    // Each kind's in-app channel, on (or off) for every urgency, through the operator's route: a response's
    // email then escalates, an invitation's item goes to the feed.
    for (const kind of IN_APP_KINDS) {
      const answer = await this.operator('PUT', `/v1/channel-policies/${kind}/in-app`, { enabled: this.inApp })
      if (!answer.ok) throw new Error(`the channel policy was refused: ${answer.status} ${await answer.text()}`)
    }
    for (const person of people) {
      if (person.contact) {
        await (await dbOfUser(person.userId))
          .prepare(
            `INSERT INTO contacts (user_id, email, locale, time_zone, display_name, version, updated_at)
           VALUES (?1, ?2, 'ru-RU', 'Europe/Moscow', ?3, 1, ?4)`,
          )
          .bind(person.userId, person.email, person.name, this.clock.iso)
          .run()
      }
      if (person.instant) {
        const answer = await this.operator('PUT', `/v1/preferences/${person.userId}`, {
          preferences: [{ kind: 'ResponseCreated', channel: 'email', enabled: true, mode: 'instant' }],
        })
        if (!answer.ok) throw new Error(`the preference was refused: ${answer.status} ${await answer.text()}`)
      }
    }
    // Cloudflare's event subscription reports every message the binding took.
    this.binding.onAccept = async (email) => {
      await this.#accepted([email.notificationId])
      await this.cloudflareEvent('delivered', email.messageId, email.to)
    }
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
         c.cancelled_at AS key_cancelled_at, n.escalation_of, n.escalated_at
       FROM notifications n LEFT JOIN cancellations c ON c.key = n.cancellation_key
       WHERE n.id IN (SELECT value FROM json_each(?1))`,
      JSON.stringify(ids),
    )
    const byId = new Map(rows.map(({ id, ...row }) => [id, row]))
    ids.forEach((notificationId, offset) => {
      const row = byId.get(notificationId)
      this.accepted.push({ notificationId, index: first + offset, at, ...(row ? { row } : {}) })
    })
  }

  /**
   * The clock moves on. Through Cloudflare's binding, whose lost answers wait
   * for its delivery events, those events are taken to reach their queue
   * within a minute: the clock does not pass one undelivered by more.
   */
  async advance(seconds: number): Promise<void> {
    const target = this.clock.now + seconds * 1000
    if (this.transport !== 'cloudflare') return this.clock.set(target)
    while (this.clock.now < target) {
      if (this.queues.EMAIL_EVENTS.visible().length > 0) await this.deliver('EMAIL_EVENTS')
      this.clock.set(Math.min(target, this.clock.now + 60_000))
    }
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
  addPerson(options: { contact: boolean; instant: boolean }): Person {
    const index = this.people.length
    const person: Person = {
      userId: crypto.randomUUID(),
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
    return chosen.length
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

  /** Every email the provider accepted, whichever transport: its notification, recipient and time. */
  emails(): { notificationId: string; to: string; at: number; providerId: string; headers: Record<string, string> }[] {
    if (this.transport === 'resend') {
      return this.resend.emails.map((email) => ({
        notificationId: email.notificationId,
        to: email.to,
        at: email.at,
        providerId: email.id,
        headers: email.headers,
      }))
    }
    return this.binding.emails.map((email) => ({
      notificationId: email.notificationId,
      to: email.to,
      at: email.at,
      providerId: email.messageId,
      headers: {},
    }))
  }

  /**
   * Lets the world run on with every fault healed until nothing is left to
   * do: each queue delivered, the cron run, the clock moved to the next time
   * something is due (a message's delay, a row's time, a probe, the grace of
   * the cron's search), at most `rounds` times. A notification that is still
   * not final after that has stalled.
   */
  async drain(rounds = 400): Promise<void> {
    this.heal()
    // A pause's next probe may be later than now (a quota's reset): the bound runs from then.
    const probes = await allRows<{ probe_at: string }>('SELECT probe_at FROM transport_pauses')
    const healedAt = Math.max(this.clock.now, ...probes.map((pause) => Date.parse(pause.probe_at)))
    for (let round = 0; round < rounds; round += 1) {
      for (const binding of ['EVENTS', 'DISPATCH', 'EMAIL_EVENTS', 'DLQ'] as const) {
        for (let step = 0; step < 20 && (await this.deliver(binding)) > 0; step += 1);
      }
      await this.cron()
      // Every shard's notifications not final, the earliest due first; a pause in any shard.
      const open = await allRows<{ scheduled_at: string }>(
        `SELECT scheduled_at FROM notifications WHERE NOT ${finalStatusSql()} ORDER BY scheduled_at LIMIT 1`,
      )
      const next = open.map((row) => row.scheduled_at).sort()[0]
      const waiting = Object.values(this.queues).some((queue) => queue.waiting.length > 0)
      const pause = (await allRows<{ probe_at: string }>('SELECT probe_at FROM transport_pauses LIMIT 1'))[0]
      if (open.length === 0 && !waiting && !pause) return
      // Probes come at most 10 minutes apart, and one that never reports back is replaced after two leases.
      if (pause && this.clock.now - healedAt > PAUSE_ENDS_WITHIN_MS) {
        const minutes = Math.round((this.clock.now - healedAt) / 60_000)
        this.stalls.push(`no stall: the transport is still paused ${minutes} min after its probe was due`)
        return
      }
      const candidates = [
        ...Object.values(this.queues).map((queue) => queue.nextVisibleAt()),
        next ? Date.parse(next) + 121_000 : undefined,
        pause ? Date.parse(pause.probe_at) : undefined,
      ].filter((at): at is number => at !== undefined && at > this.clock.now)
      // At least a minute, as the cron runs; at most to the next thing due.
      this.clock.set(Math.max(this.clock.now + 60_000, Math.min(...candidates, this.clock.now + 3_600_000)))
    }
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
    for (const queue of Object.values(this.queues)) queue.refusing = false
    this.d1.heal()
  }
}
