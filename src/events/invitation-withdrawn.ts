import { z } from 'zod'
import example from '../../examples/arthunt/invitation.withdrawn.json' with { type: 'json' }
import { Actor } from '../contracts/arthunt.ts'
import { Id } from '../contracts/fields.ts'
import { defineEventType } from './define.ts'
import { invitationKey } from './invitation-created.ts'

/** `data` of `invitation.withdrawn`: a client withdrew an invitation before the specialist answered it. */
export const InvitationWithdrawnSchema = z.object({
  invitationId: Id.describe('the invitation withdrawn, as `invitation.created` named it'),
  actor: Actor.nullish().describe('the client who withdrew it'),
})

/**
 * `invitation.withdrawn`: tells nobody; it withdraws what `invitation.created`
 * of the same invitation notified and has not gone out (the email waiting
 * for quiet hours to end, the item in the specialist's feed), and — should
 * it arrive first — what that event would notify.
 */
export const invitationWithdrawn = defineEventType({
  family: 'arthunt',
  type: 'invitation.withdrawn',
  summary: 'A client withdrew an invitation: what its invitation.created notified and has not gone out is withdrawn.',
  schema: InvitationWithdrawnSchema,
  channels: {
    rabbitmq: { exchange: 'arthunt.notifications', routingKey: 'notifications.email.invitation.withdrawn' },
    outbox: true,
  },
  example: { body: example },
  kinds: [],
  intent: ({ payload }) => ({
    type: 'cancel',
    key: invitationKey(payload.invitationId),
    reason: 'the invitation was withdrawn',
  }),
})
