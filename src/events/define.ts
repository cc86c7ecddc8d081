import type { z } from 'zod'

/** How urgent a notification is; quiet hours hold the urgencies configured (Low by default). */
export type Urgency = 'low' | 'normal' | 'high'

/** Who is to be told: a user, with an address when the event carries one (ArtHunt). */
export type RecipientRef = { userId: string; inline?: { email: string; displayName: string } }

/** A verification decision, to keep one email per decision across its two sources (the PIN profile-events spec). */
export type Decision = {
  /** `{PersonId}:{approved|rejected}` */
  person: string
  /** The verification request, when the event names it. */
  request: string | null
  /** True for the fallback source (person-upserted). */
  fallback: boolean
  /** When it was decided: the event's time (ISO, UTC). */
  at: string
}

/** A contact of the replica, as an event or the API writes it. */
export type ContactUpdate = {
  userId: string
  email: string
  locale: string | null
  timeZone: string | null
  displayName: string | null
  version: number
}

/** What an event asks for. */
export type Intent =
  | {
      type: 'notify'
      /** A kind this event type declares. */
      kind: string
      urgency: Urgency
      /** Explicit recipients, or the reviewer pool. */
      recipients: RecipientRef[] | 'reviewer-pool'
      /** Template variables (recipientName is added per recipient). */
      model: Record<string, unknown>
      decision?: Decision
      traceId?: string
      /**
       * What a cancellation names to withdraw these notifications: the
       * kind's own (derived from its data, e.g. the invitation's id), else
       * the one the event's envelope or headers carry.
       */
      cancellationKey?: string
    }
  | {
      type: 'cancel'
      /** Withdraws every notification of this key that has not gone out (src/cancel/). */
      key: string
      reason?: string
    }
  | { type: 'contact'; contact: ContactUpdate }
  | { type: 'ignored'; reason: string }

/** The three Liquid parts of an email template. */
export type TemplateParts = { subject: string; textBody: string; htmlBody: string }

/**
 * The Liquid parts of an in-app item: a one-line title, a plain-text body,
 * and optionally the address a click opens and one action (a button's label
 * and address). Kept as a template of the `in-app` channel whose three parts
 * are the title, the body, and the lines of the link, the action's label and
 * the action's address (src/templates/in-app.ts).
 */
export type InAppTemplateParts = { title: string; body: string; link?: string; action?: { label: string; url: string } }

/**
 * Whether a recipient may turn a kind off. `transactional`: always sent (a
 * decision about the recipient, a task assigned to them), no unsubscribe link.
 * `optional`: sent unless the recipient opted out of it (preferences, or the
 * one-click unsubscribe link every such email carries).
 */
export type KindCategory = 'transactional' | 'optional'

/**
 * When a digest closes: `window` — the first notification opens it and it
 * closes that many minutes later; `daily` — it closes at a local time
 * (`HH:MM`) in the recipient's time zone. DIGEST_WINDOW_SECONDS, when set,
 * replaces either (tests, demos, local runs).
 */
export type DigestSchedule = { window: { minutes: number } } | { daily: { at: string } }

/** One email per notification, or one for all of a digest's. */
export type DeliveryMode = 'instant' | 'digest'

/**
 * How one channel of a kind reaches a recipient: `instant` — one email per
 * notification — or `digest` — one email for all of a window's notifications
 * — by default (a recipient may choose the other where the kind has a
 * digest), and at most `throttle.max` emails per `throttle.windowMinutes` to
 * one recipient. Only an optional kind may have a digest or a throttle: a
 * transactional one (a decision about the recipient) always goes at once.
 */
export type DeliveryPolicy = {
  /**
   * Whether quiet hours hold it back, for the urgencies QUIET_HOURS_URGENCIES
   * names. @defaultValue true for email; false for in-app, which makes no sound
   */
  quietHours?: boolean
  default: DeliveryMode
  digest?: DigestSchedule
  throttle?: { max: number; windowMinutes: number }
}

/**
 * An email that waits for its in-app item: the item goes to the feed at
 * once, the email `afterMinutes` later, and only if by then the recipient had
 * not `seen` (or `read`) the item. It applies where the kind reaches a
 * recipient by both channels; a recipient who turned either off gets the
 * other alone, the email at once. ESCALATION_AFTER_SECONDS, when set,
 * replaces `afterMinutes` (tests, demos, local runs).
 */
export type Escalation = { afterMinutes: number; unless: 'seen' | 'read' }

/** A kind of notification, with what it needs to be sent without any configuration. */
export type KindDefinition = {
  /** E.g. `ResponseCreated`: names templates, channel policies, preferences, metrics. */
  name: string
  /** One line for the documents. */
  summary: string
  /** Whether recipients may opt out of it. */
  category: KindCategory
  /**
   * What recipients call it, by locale (`ru`, `en`, …): the unsubscribe page
   * and preference screens show it. @defaultValue the summary
   */
  labels?: Record<string, string>
  /**
   * Default templates by locale (`ru`, `en`, …). A template saved through the
   * API for (kind, locale, channel) replaces the default of that locale.
   */
  templates: Record<string, TemplateParts>
  /**
   * Default templates of its in-app item, by locale: without them the kind
   * has no `in-app` channel (a channel policy that enables it renders
   * nothing, and the event is dead-lettered NTF_TEMPLATE_NOT_RESOLVED).
   */
  inAppTemplates?: Record<string, InAppTemplateParts>
  /** Channels when no channel policy is stored for the kind. @defaultValue ['email'] */
  channels?: readonly string[]
  /** Its email waits for its in-app item to go unseen (requires `inAppTemplates`). @defaultValue none */
  escalation?: Escalation
  /** How each channel delivers it (digests, throttling). @defaultValue instant on every channel */
  delivery?: Partial<Record<string, DeliveryPolicy>>
  /**
   * Default templates of its digest, by locale: rendered with `items` (each
   * notification's model, oldest first) and `count` (all of them, when
   * `items` holds only the first DIGEST_MAX_ITEMS). Required with a digest.
   */
  digestTemplates?: Record<string, TemplateParts>
}

/** The envelopes this Worker reads; an event type belongs to one. */
export type Family = 'arthunt' | 'pin'

/** Where producers publish an event type (for the AsyncAPI document and the bridge's configuration). */
export type Channels = {
  rabbitmq?: { exchange: string; routingKey: string }
  kafka?: { topic: string }
  /** Also written to the PostgreSQL outbox (any event can be). */
  outbox?: boolean
}

/** A valid event of a type, as its `intent` sees it. */
export type EventOf<T> = {
  eventType: string
  /** ArtHunt `envelope.eventId`, PIN `message-id` header. */
  eventId: string
  payload: T
  /** When it happened: `envelope.occurredAt` or the `created-at` header, else when the bridge read it (ISO). */
  occurredAt: string
  traceId?: string
  /** The key its envelope or headers name, if any. */
  cancellationKey?: string
}

/**
 * Everything about one event type in one place: its contract, how it is
 * recognised on the wire (family + type), its kinds with their default
 * templates, its example, where it is published, and what it asks for. The
 * registry (registry.ts) lists them; decoding, planning, dead-letter kinds,
 * template examples and defaults, channel policies and the AsyncAPI document
 * all derive from that list.
 */
export type EventTypeDefinition<T = unknown> = {
  /** The envelope: ArtHunt `{envelope, data}` bodies, or PIN events with metadata in headers. */
  family: Family
  /** `envelope.eventType` (ArtHunt) or the `event-type` header (PIN). */
  type: string
  /** One line for the documents. */
  summary: string
  /** The contract of `data` (ArtHunt) or of the whole payload (PIN); field docs go in `.describe()`. */
  schema: z.ZodType<T>
  /** The kinds it can make (none for an event that only feeds the contact replica). */
  kinds: readonly KindDefinition[]
  /** A real example: the ArtHunt body, or the PIN payload with its headers. */
  example: { body: unknown; headers?: Record<string, string> }
  /** Where producers publish it. */
  channels: Channels
  /** What a valid event asks for: a notification, a contact update, or nothing. */
  intent(event: EventOf<T>): Intent
}

/** Declares an event type (typing `intent` by the schema). */
export function defineEventType<T>(definition: EventTypeDefinition<T>): EventTypeDefinition<T> {
  return definition
}
