import { z } from 'zod'
import example from '../../examples/pin/verification-completed.json' with { type: 'json' }
import { RequiredId, Text } from '../contracts/fields.ts'
import { defineEventType, type KindDefinition } from './define.ts'

/**
 * Payload of `verification-completed`: a decision; the owner is told.
 * `Decision` is any non-empty string here: a value other than approved or
 * rejected is a newer producer's enum member and is ignored, not dead-lettered.
 */
export const VerificationCompletedSchema = z.object({
  RequestId: RequiredId.describe('the verification request decided'),
  PersonId: RequiredId.describe('the person'),
  UserId: RequiredId.describe("the person's owner, who is told"),
  Decision: Text.describe('approved or rejected (another value is ignored)'),
  Reason: z.string().max(4000).nullish().describe('why it was rejected; shown only to the owner, never logged'),
})

/** The kind of a decision, by its (lower-cased) value. */
export const DECISION_KINDS: Record<string, 'VerificationApproved' | 'VerificationRejected'> = {
  approved: 'VerificationApproved',
  rejected: 'VerificationRejected',
}

/** The two decision kinds; person-upserted makes them too, as the fallback source. */
export const decisionKinds: readonly KindDefinition[] = [
  {
    name: 'VerificationApproved',
    summary: 'Your verification is approved',
    category: 'transactional',
    templates: {
      ru: {
        subject: 'Верификация пройдена',
        textBody: `Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!

Ваши персональные данные успешно прошли верификацию.`,
        htmlBody: `<p>Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!</p>
<p>Ваши персональные данные успешно прошли верификацию.</p>`,
      },
      en: {
        subject: 'Your verification is approved',
        textBody: `Hello{% if recipientName %} {{ recipientName }}{% endif %},

Your personal data has been verified.`,
        htmlBody: `<p>Hello{% if recipientName %} {{ recipientName }}{% endif %},</p>
<p>Your personal data has been verified.</p>`,
      },
    },
  },
  {
    name: 'VerificationRejected',
    summary: 'Your verification was rejected (with the reason)',
    category: 'transactional',
    templates: {
      ru: {
        subject: 'Верификация отклонена',
        textBody: `Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!

К сожалению, верификация ваших персональных данных отклонена.{% if reason %}
Причина: {{ reason }}{% endif %}

Вы можете исправить данные и подать заявку снова.`,
        htmlBody: `<p>Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!</p>
<p>К сожалению, верификация ваших персональных данных отклонена.</p>
{% if reason %}<p>Причина: {{ reason }}</p>
{% endif %}<p>Вы можете исправить данные и подать заявку снова.</p>`,
      },
      en: {
        subject: 'Your verification was rejected',
        textBody: `Hello{% if recipientName %} {{ recipientName }}{% endif %},

Unfortunately, the verification of your personal data was rejected.{% if reason %}
Reason: {{ reason }}{% endif %}

You can correct your data and submit a new request.`,
        htmlBody: `<p>Hello{% if recipientName %} {{ recipientName }}{% endif %},</p>
<p>Unfortunately, the verification of your personal data was rejected.</p>
{% if reason %}<p>Reason: {{ reason }}</p>
{% endif %}<p>You can correct your data and submit a new request.</p>`,
      },
    },
  },
]

/** `verification-completed`: the authoritative source of decisions; the owner is told. */
export const verificationCompleted = defineEventType({
  family: 'pin',
  type: 'verification-completed',
  summary: 'A verification was decided (the authoritative source): the owner is told, with the reason of a rejection.',
  schema: VerificationCompletedSchema,
  channels: { kafka: { topic: 'pin.profile.verification-requests.v1' } },
  example: { body: example.value, headers: example.headers },
  kinds: decisionKinds,
  intent: ({ payload, occurredAt, traceId }) => {
    const decision = payload.Decision.trim().toLowerCase()
    const kind = DECISION_KINDS[decision]
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
        at: occurredAt,
      },
      traceId,
    }
  },
})
