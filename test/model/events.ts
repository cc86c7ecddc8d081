import type { Person } from './world.ts'

/**
 * The events of a model run, as the bridge forwards them (InboundEvent): the
 * examples' shapes with the run's people in them. Actors are never a run's
 * people: a name that appears in someone else's email is out of an erasure's
 * reach (docs/architecture.md), so the model keeps the two apart.
 */

let counter = 0

function inbound(value: unknown, headers: Record<string, string> = {}) {
  counter += 1
  return {
    source: 'http',
    origin: `model:${counter}`,
    sourceMessageId: `model-${crypto.randomUUID()}`,
    receivedAt: new Date().toISOString(),
    headers,
    body: JSON.stringify(value),
  }
}

function arthunt(eventType: string, data: Record<string, unknown>, envelope: { cancellationKey?: string } = {}) {
  return inbound({
    envelope: {
      eventId: crypto.randomUUID(),
      eventType,
      schemaVersion: 1,
      occurredAt: new Date().toISOString(),
      producer: 'arthunt-api',
      ...envelope,
    },
    data,
  })
}

function pin(eventType: string, aggregate: string, value: Record<string, unknown>) {
  return inbound(value, {
    'message-id': crypto.randomUUID(),
    'event-type': eventType,
    'created-at': new Date().toISOString(),
    'contract-version': '1',
    'aggregate-id': aggregate,
  })
}

const ACTOR = { userId: '9f4e8b7a-2c9f-4f1e-b5c3-6d2e1f0a8b77', displayName: 'Исполнитель Модели' }

/**
 * A specialist responded to the person's project: digested, or throttled when
 * they take responses one by one; its email escalates where the in-app
 * channel is on. Its envelope names the cancellation key
 * `response:{responseId}` (a producer may give any event one), so that a
 * cancellation meets an email waiting to escalate, or in a digest.
 */
export function response(person: Person, responseId: string = crypto.randomUUID()) {
  return arthunt(
    'response.created',
    {
      responseId,
      projectId: crypto.randomUUID(),
      projectTitle: 'Проект модели',
      recipient: { userId: person.userId, email: person.email, displayName: person.name },
      actor: ACTOR,
      proposedPrice: 45000,
      proposedCurrency: 'RUB',
      proposedDeadlineDays: 14,
      deepLink: 'https://arthunt.ru/projects/model/responses',
    },
    { cancellationKey: responseKey(responseId) },
  )
}

/** The cancellation key the model's responses carry in their envelope. */
export function responseKey(responseId: string): string {
  return `response:${responseId}`
}

/**
 * The person was invited to a project: sent at once (and shown in their feed).
 * Its notifications carry the cancellation key `invitation:{invitationId}`.
 */
export function invitation(person: Person, invitationId: string = crypto.randomUUID()) {
  return arthunt('invitation.created', {
    invitationId,
    projectId: crypto.randomUUID(),
    projectTitle: 'Проект модели',
    recipient: { userId: person.userId, email: person.email, displayName: person.name },
    actor: ACTOR,
    message: 'Добрый день!',
    deepLink: 'https://arthunt.ru/invitations/model',
  })
}

/**
 * The client withdrew an invitation: what its invitation.created notified
 * and has not gone out is withdrawn, and, should it come first, that event
 * notifies nothing.
 */
export function withdrawal(invitationId: string) {
  return arthunt('invitation.withdrawn', { invitationId, actor: ACTOR })
}

/** The cancellation key of an invitation's notifications, as invitation.created derives it. */
export function invitationKey(invitationId: string): string {
  return `invitation:${invitationId}`
}

/**
 * A verification decision about the person: from verification-requests (the
 * authoritative source) or from a person-upserted status change (the
 * fallback). Its recipient is resolved through the contact replica.
 */
export function decision(person: Person, requestId: string, source: 'authoritative' | 'fallback') {
  if (source === 'authoritative') {
    return pin('verification-completed', requestId, {
      RequestId: requestId,
      PersonId: person.personId,
      UserId: person.userId,
      Decision: 'rejected',
      Reason: 'Фото паспорта нечитаемо',
    })
  }
  return pin('person-upserted', person.personId, {
    PersonId: person.personId,
    UserId: person.userId,
    VerificationStatus: 'rejected',
    PreviousVerificationStatus: 'pending',
    VerificationRequestId: requestId,
  })
}

/** The person's contact, as it is now, reaches the replica (a newer version than the last). */
export function contact(person: Person) {
  person.contactVersion += 1
  return pin('contact-upserted', person.userId, {
    UserId: person.userId,
    Email: person.email,
    Locale: 'ru-RU',
    TimeZone: 'Europe/Moscow',
    DisplayName: person.name,
    Version: person.contactVersion,
  })
}
