import { z } from 'zod'
import example from '../../examples/pin/verification-request-submitted.json' with { type: 'json' }
import { RequiredId } from '../contracts/fields.ts'
import { defineEventType } from './define.ts'

/** Payload of `verification-request-submitted`: a person asked for verification; the reviewer is told. */
export const VerificationRequestSubmittedSchema = z.object({
  RequestId: RequiredId.describe('the verification request'),
  PersonId: RequiredId.describe('the person to verify'),
  UserId: RequiredId.describe("the person's owner"),
  ReviewerUserId: RequiredId.nullish().describe(
    'the assigned reviewer; without one, every reviewer of the pool is told',
  ),
})

/** `verification-request-submitted`: the assigned reviewer, or the whole reviewer pool, is told. */
export const verificationRequestSubmitted = defineEventType({
  family: 'pin',
  type: 'verification-request-submitted',
  summary: 'A person asked for verification: the assigned reviewer (or every reviewer of the pool) is told.',
  schema: VerificationRequestSubmittedSchema,
  channels: { kafka: { topic: 'pin.profile.verification-requests.v1' } },
  example: { body: example.value, headers: example.headers },
  kinds: [
    {
      name: 'VerificationSubmitted',
      summary: 'A verification request waits for review',
      category: 'transactional',
      templates: {
        ru: {
          subject: 'Новая заявка на верификацию',
          textBody: `Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!

Поступила новая заявка на верификацию персональных данных (заявка {{ requestId }}). Пожалуйста, рассмотрите её.`,
          htmlBody: `<p>Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!</p>
<p>Поступила новая заявка на верификацию персональных данных (заявка {{ requestId }}). Пожалуйста, рассмотрите её.</p>`,
        },
        en: {
          subject: 'New verification request',
          textBody: `Hello{% if recipientName %} {{ recipientName }}{% endif %},

A new personal data verification request is waiting for your review (request {{ requestId }}).`,
          htmlBody: `<p>Hello{% if recipientName %} {{ recipientName }}{% endif %},</p>
<p>A new personal data verification request is waiting for your review (request {{ requestId }}).</p>`,
        },
      },
    },
  ],
  intent: ({ payload, traceId }) => ({
    type: 'notify',
    kind: 'VerificationSubmitted',
    urgency: 'normal',
    recipients: payload.ReviewerUserId ? [{ userId: payload.ReviewerUserId }] : 'reviewer-pool',
    model: { requestId: payload.RequestId, personId: payload.PersonId },
    traceId,
  }),
})
