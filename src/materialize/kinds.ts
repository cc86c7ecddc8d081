import type { ContactUpserted, DecodedEvent } from '../contracts/index.ts'

/** The notification kinds of the seeds. */
export const KINDS = [
  'ResponseCreated',
  'InvitationCreated',
  'VerificationSubmitted',
  'VerificationApproved',
  'VerificationRejected',
] as const

/** A notification kind. */
export type Kind = (typeof KINDS)[number]

/** How urgent a notification is; quiet hours hold the urgencies configured (Low by default). */
export type Urgency = 'low' | 'normal' | 'high'

/** Who is to be told: a user, with an address when the event carries one (ArtHunt). */
export type RecipientRef = { userId: string; inline?: { email: string; displayName: string } }

/** A verification decision, to keep one email per decision across its two sources (seed 002). */
export type Decision = {
  /** `{PersonId}:{approved|rejected}` */
  person: string
  /** The verification request, when the event names it. */
  request: string | null
  /** True for the fallback source (person-upserted). */
  fallback: boolean
  /** When it was decided: the event's `created-at`, else when the bridge read it (ISO, UTC). */
  at: string
}

/** What an event asks for. */
export type Intent =
  | {
      type: 'notify'
      kind: Kind
      urgency: Urgency
      /** Explicit recipients, or the reviewer pool. */
      recipients: RecipientRef[] | 'reviewer-pool'
      /** Template variables (recipientName is added per recipient). */
      model: Record<string, unknown>
      decision?: Decision
      traceId?: string
    }
  | { type: 'contact'; contact: ContactUpserted }
  | { type: 'ignored'; reason: string }

const DECISIONS: Record<string, 'VerificationApproved' | 'VerificationRejected'> = {
  approved: 'VerificationApproved',
  rejected: 'VerificationRejected',
}

/**
 * Maps a valid event to what it asks for (DESIGN §4, seed 002's table):
 * AH-MVP-007 and AH-MVP-006 to the inline recipient, a verification request to
 * its reviewer (or the pool), a decision to the person's owner, a
 * person-upserted status change to a Low-urgency fallback decision, and
 * anything else to `ignored-event`.
 */
export function intentOf(event: DecodedEvent, receivedAt: string): Intent {
  switch (event.eventType) {
    case 'response.created': {
      const { data } = event
      return {
        type: 'notify',
        kind: 'ResponseCreated',
        urgency: 'normal',
        recipients: [{ userId: data.recipient.userId, inline: data.recipient }],
        model: {
          actorName: data.actor.displayName,
          projectTitle: data.projectTitle,
          proposedPrice: data.proposedPrice ?? null,
          proposedCurrency: data.proposedCurrency ?? 'RUB',
          proposedDeadlineDays: data.proposedDeadlineDays ?? null,
          deepLink: data.deepLink,
        },
        traceId: event.envelope.traceId ?? undefined,
      }
    }
    case 'invitation.created': {
      const { data } = event
      return {
        type: 'notify',
        kind: 'InvitationCreated',
        urgency: 'normal',
        recipients: [{ userId: data.recipient.userId, inline: data.recipient }],
        model: {
          actorName: data.actor.displayName,
          projectTitle: data.projectTitle ?? null,
          message: data.message ?? null,
          deepLink: data.deepLink,
        },
        traceId: event.envelope.traceId ?? undefined,
      }
    }
    case 'verification-request-submitted': {
      const { payload } = event
      return {
        type: 'notify',
        kind: 'VerificationSubmitted',
        urgency: 'normal',
        recipients: payload.ReviewerUserId ? [{ userId: payload.ReviewerUserId }] : 'reviewer-pool',
        model: { requestId: payload.RequestId, personId: payload.PersonId },
        traceId: pinTrace(event.meta),
      }
    }
    case 'verification-completed': {
      const { payload } = event
      const decision = payload.Decision.trim().toLowerCase()
      const kind = DECISIONS[decision]
      if (!kind) return { type: 'ignored', reason: `unknown Decision value "${payload.Decision.slice(0, 50)}"` }
      return {
        type: 'notify',
        kind,
        urgency: 'normal',
        recipients: [{ userId: payload.UserId }],
        model: { requestId: payload.RequestId, personId: payload.PersonId, reason: payload.Reason ?? null },
        decision: {
          person: `${payload.PersonId}:${decision}`,
          request: payload.RequestId,
          fallback: false,
          at: decidedAt(event.meta, receivedAt),
        },
        traceId: pinTrace(event.meta),
      }
    }
    case 'person-upserted': {
      const { payload } = event
      const status = payload.VerificationStatus?.trim().toLowerCase()
      const previous = payload.PreviousVerificationStatus?.trim().toLowerCase()
      if (!status || status === previous)
        return { type: 'ignored', reason: 'person upsert without a verification status change' }
      const kind = DECISIONS[status]
      if (!kind) return { type: 'ignored', reason: `verification status "${status.slice(0, 50)}" is not a decision` }
      return {
        type: 'notify',
        kind,
        urgency: 'low',
        recipients: [{ userId: payload.UserId }],
        model: { requestId: payload.VerificationRequestId ?? null, personId: payload.PersonId, reason: null },
        decision: {
          person: `${payload.PersonId}:${status}`,
          request: payload.VerificationRequestId ?? null,
          fallback: true,
          at: decidedAt(event.meta, receivedAt),
        },
        traceId: pinTrace(event.meta),
      }
    }
    case 'contact-upserted':
      return { type: 'contact', contact: event.payload }
  }
}

function decidedAt(meta: { 'created-at'?: string }, receivedAt: string): string {
  return new Date(meta['created-at'] ?? receivedAt).toISOString()
}

function pinTrace(meta: Record<string, unknown>): string | undefined {
  const trace = meta['trace-id'] ?? meta.traceparent
  return typeof trace === 'string' ? trace : undefined
}
