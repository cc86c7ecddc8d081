import type { Config } from '../config.ts'
import type { DecodedEvent } from '../contracts/index.ts'
import { PipelineError } from '../errors.ts'
import { render } from '../templates/render.ts'
import { localeChain, resolveTemplate } from '../templates/resolve.ts'
import type { BatchContext, Contact } from './context.ts'
import type { Intent, Kind, RecipientRef, Urgency } from './kinds.ts'
import { type NotificationRow, notificationId } from './notification.ts'
import { quietHoursEnd } from './quiet-hours.ts'

/** How an event ends, as logged and counted. */
export type Outcome =
  | 'enqueued'
  | 'undeliverable'
  | 'no-recipients'
  | 'no-channels'
  | 'ignored-event'
  | 'contact-upserted'
  | 'skipped-duplicate'

/** What materialize does with one valid event. */
export type Plan =
  | { type: 'duplicate'; redispatch: { id: string; scheduledAt: string }[] }
  | { type: 'fail'; error: PipelineError }
  | {
      type: 'record'
      outcome: Outcome
      kind?: Kind
      notifications: NotificationRow[]
      contact?: Contact
      note?: string
    }

/** One event of the batch with what it asks for. */
export type Work = {
  event: DecodedEvent
  source: string
  attempts: number
  intent: Intent
}

/**
 * Decides what one event becomes, from the batch context alone (no I/O):
 * recipients (deduplicated), channels, contact snapshot, template and
 * rendering, quiet hours. A contact upsert also updates `context.contacts`,
 * so later events of the same batch see it.
 */
export async function planEvent(work: Work, context: BatchContext, config: Config, now: Date): Promise<Plan> {
  const { event, intent } = work
  if (context.processed.has(event.idempotencyKey)) {
    return { type: 'duplicate', redispatch: context.pendingByEvent.get(event.idempotencyKey) ?? [] }
  }
  if (intent.type === 'ignored')
    return { type: 'record', outcome: 'ignored-event', notifications: [], note: intent.reason }
  if (intent.type === 'contact') {
    const contact: Contact = {
      userId: intent.contact.UserId,
      email: intent.contact.Email,
      locale: intent.contact.Locale ?? null,
      timeZone: intent.contact.TimeZone ?? null,
      displayName: intent.contact.DisplayName ?? null,
      version: intent.contact.Version,
    }
    const known = context.contacts.get(contact.userId)
    if (!known || known.version < contact.version) context.contacts.set(contact.userId, contact)
    return { type: 'record', outcome: 'contact-upserted', notifications: [], contact }
  }

  const { decision } = intent
  if (
    decision?.fallback &&
    context.authoritative.some((row) => sameDecision(row, decision, config.DECISION_MATCH_SECONDS))
  ) {
    return {
      type: 'record',
      outcome: 'ignored-event',
      kind: intent.kind,
      notifications: [],
      note: 'verification decision already notified from verification-requests (authoritative)',
    }
  }

  const recipients = dedupe(
    intent.recipients === 'reviewer-pool' ? context.reviewerPool.map((userId) => ({ userId })) : intent.recipients,
  )
  if (recipients.length === 0) return { type: 'record', outcome: 'no-recipients', kind: intent.kind, notifications: [] }
  const channels = context.channels.get(`${intent.kind}|${intent.urgency}`) ?? []
  if (channels.length === 0) return { type: 'record', outcome: 'no-channels', kind: intent.kind, notifications: [] }

  const missing = recipients.filter((recipient) => !recipient.inline && !context.contacts.has(recipient.userId))
  if (missing.length > 0 && work.attempts < config.maxAttempts) {
    return {
      type: 'fail',
      error: new PipelineError(
        'NTF_CONTACT_NOT_FOUND',
        `no contact in the replica for ${missing.length} recipient(s) of ${intent.kind}: ${missing.map((r) => r.userId).join(', ')}`,
      ),
    }
  }

  const notifications: NotificationRow[] = []
  for (const recipient of recipients) {
    const contact = context.contacts.get(recipient.userId)
    const email = recipient.inline?.email ?? contact?.email ?? null
    const name = recipient.inline?.displayName ?? contact?.displayName ?? null
    const locale = contact?.locale ?? config.DEFAULT_LOCALE
    const timeZone = contact?.timeZone ?? config.DEFAULT_TIME_ZONE
    for (const channel of channels) {
      const base = {
        id: await notificationId(event.eventId, recipient.userId, channel, intent.kind),
        idempotencyKey: event.idempotencyKey,
        eventId: event.eventId,
        source: work.source,
        sourceMessageId: event.eventId,
        kind: intent.kind,
        channel,
        urgency: intent.urgency,
        recipientUserId: recipient.userId,
        recipientEmail: email,
        recipientName: name,
        locale,
        timeZone,
        isFallback: decision?.fallback ?? false,
        decisionPerson: decision?.person ?? null,
        decisionRequest: decision?.request ?? null,
        decisionAt: decision?.at ?? null,
        traceId: intent.traceId ?? null,
      }
      if (email === null) {
        notifications.push({
          ...base,
          subject: null,
          textBody: null,
          htmlBody: null,
          templateVersion: null,
          status: 'undeliverable',
          statusReason: `no contact for user ${recipient.userId} in the replica after ${work.attempts} attempts`,
          errorCode: 'NTF_CONTACT_NOT_FOUND',
          scheduledAt: now.toISOString(),
        })
        continue
      }
      const template = resolveTemplate(
        context.templates,
        intent.kind,
        channel,
        localeChain(locale, config.DEFAULT_LOCALE),
      )
      if (!template) {
        return {
          type: 'fail',
          error: new PipelineError(
            'NTF_TEMPLATE_NOT_RESOLVED',
            `no active template for (${intent.kind}, ${localeChain(locale, config.DEFAULT_LOCALE).join(' → ')}, ${channel})`,
          ),
        }
      }
      let rendered: ReturnType<typeof render>
      try {
        rendered = render(template, { ...intent.model, recipientName: name }, template.locale, config.templateLimits)
      } catch (cause) {
        return {
          type: 'fail',
          error: new PipelineError(
            'NTF_TEMPLATE_INVALID',
            `template (${template.kind}, ${template.locale}, ${template.channel}) v${template.version} failed to render: ${(cause as Error).message}`,
            { cause },
          ),
        }
      }
      notifications.push({
        ...base,
        locale: template.locale,
        subject: rendered.subject,
        textBody: rendered.text,
        htmlBody: rendered.html,
        templateVersion: template.version,
        status: 'pending',
        statusReason: null,
        errorCode: null,
        scheduledAt: scheduleFor(intent.urgency, base.isFallback, timeZone, config, now).toISOString(),
      })
    }
  }
  const outcome = notifications.some((row) => row.status === 'pending') ? 'enqueued' : 'undeliverable'
  return { type: 'record', outcome, kind: intent.kind, notifications }
}

/**
 * When to send: now; a fallback decision after its grace period; an urgency
 * held by quiet hours when they end in the recipient's zone.
 */
export function scheduleFor(
  urgency: Urgency,
  isFallback: boolean,
  timeZone: string,
  config: Pick<Config, 'FALLBACK_GRACE_SECONDS' | 'QUIET_HOURS_URGENCIES' | 'QUIET_HOURS_START' | 'QUIET_HOURS_END'>,
  now: Date,
): Date {
  const earliest = isFallback ? new Date(now.getTime() + config.FALLBACK_GRACE_SECONDS * 1000) : now
  if (!config.QUIET_HOURS_URGENCIES.includes(urgency)) return earliest
  return quietHoursEnd(earliest, timeZone, config.QUIET_HOURS_START, config.QUIET_HOURS_END) ?? earliest
}

/** A decision as stored: who and what, which request, when. */
export type DecisionRef = { person: string; request: string | null; at: string | null }

/**
 * Whether two verification notifications are about the same decision: the
 * same person and decision, and the same request when both name one; when one
 * names none, decided within `windowSeconds` of each other (a later decision
 * for the same person — a new request — is a decision of its own). A row
 * without a time (written before decision times were kept) matches as before.
 * `SAME_DECISION` in dispatch/claim.ts is this rule in SQL.
 */
export function sameDecision(a: DecisionRef, b: DecisionRef, windowSeconds: number): boolean {
  if (a.person !== b.person) return false
  if (a.request !== null && b.request !== null) return a.request === b.request
  if (a.at === null || b.at === null) return true
  return Math.abs(Date.parse(a.at) - Date.parse(b.at)) <= windowSeconds * 1000
}

function dedupe(recipients: readonly RecipientRef[]): RecipientRef[] {
  const seen = new Map<string, RecipientRef>()
  for (const recipient of recipients) if (!seen.has(recipient.userId)) seen.set(recipient.userId, recipient)
  return [...seen.values()]
}
