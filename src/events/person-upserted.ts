import { z } from 'zod'
import example from '../../examples/pin/person-upserted.json' with { type: 'json' }
import { RequiredId } from '../contracts/fields.ts'
import { defineEventType } from './define.ts'
import { DECISION_KINDS } from './verification-completed.ts'

/** Payload of `person-upserted`: a person changed; only a verification status change may notify. */
export const PersonUpsertedSchema = z.object({
  PersonId: RequiredId.describe('the person'),
  UserId: RequiredId.describe("the person's owner"),
  VerificationStatus: z.string().nullish().describe('the status now'),
  PreviousVerificationStatus: z.string().nullish().describe('the status before'),
  VerificationRequestId: RequiredId.nullish().describe('the request that decided it, when the producer knows'),
})

/**
 * `person-upserted`: the fallback source of decisions (the PIN profile-events spec). A status
 * change to approved or rejected is a Low-urgency decision held for
 * FALLBACK_GRACE_SECONDS, so that the authoritative verification-completed
 * wins when both arrive; anything else is ignored.
 */
export const personUpserted = defineEventType({
  family: 'pin',
  type: 'person-upserted',
  summary: 'A person changed: a verification status change is a fallback decision, anything else is ignored.',
  schema: PersonUpsertedSchema,
  channels: { kafka: { topic: 'pin.profile.persons.v1' } },
  example: { body: example.value, headers: example.headers },
  // Its kinds are verification-completed's (VerificationApproved, VerificationRejected).
  kinds: [],
  intent: ({ payload, occurredAt, traceId }) => {
    const status = payload.VerificationStatus?.trim().toLowerCase()
    const previous = payload.PreviousVerificationStatus?.trim().toLowerCase()
    if (!status || status === previous)
      return { type: 'ignored', reason: 'person upsert without a verification status change' }
    const kind = DECISION_KINDS[status]
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
        at: occurredAt,
      },
      traceId,
    }
  },
})
