import { z } from 'zod'
import example from '../../examples/arthunt/invitation.created.json' with { type: 'json' }
import { Actor, Recipient } from '../contracts/arthunt.ts'
import { HttpUrl, Id, Text } from '../contracts/fields.ts'
import { defineEventType } from './define.ts'

/** `data` of `invitation.created` (AH-MVP-006): a client invited a specialist; the specialist is told. */
export const InvitationCreatedSchema = z.object({
  invitationId: Id.describe('the invitation'),
  projectId: Id.nullish().describe('the project, when the invitation is tied to one'),
  projectTitle: Text.nullish().describe('its title'),
  recipient: Recipient.describe('the invited specialist, who is told'),
  actor: Actor.describe('the client who invited'),
  message: z.string().max(2000).nullish().describe("the client's message"),
  deepLink: HttpUrl.describe('where the specialist opens the invitation'),
})

/**
 * The cancellation key of an invitation's notifications: `invitation.withdrawn`
 * (./invitation-withdrawn.ts) names the same one.
 */
export function invitationKey(invitationId: string): string {
  return `invitation:${invitationId}`
}

/** `invitation.created`: one email to the invited specialist (and an item in their feed, where the in-app channel is on). */
export const invitationCreated = defineEventType({
  family: 'arthunt',
  type: 'invitation.created',
  summary: 'A client invited a specialist: the specialist is told.',
  schema: InvitationCreatedSchema,
  channels: {
    rabbitmq: { exchange: 'arthunt.notifications', routingKey: 'notifications.email.invitation.created' },
    outbox: true,
  },
  example: { body: example },
  kinds: [
    {
      name: 'InvitationCreated',
      summary: 'You are invited to a project',
      category: 'optional',
      labels: { ru: 'приглашения в проекты', en: 'invitations to projects' },
      inAppTemplates: {
        ru: {
          title: '{{ actorName }} приглашает вас{% if projectTitle %} в проект «{{ projectTitle }}»{% endif %}',
          body: '{% if message %}{{ message }}{% endif %}',
          link: '{{ deepLink }}',
          action: { label: 'Открыть приглашение', url: '{{ deepLink }}' },
        },
        en: {
          title: '{{ actorName }} invites you{% if projectTitle %} to the project "{{ projectTitle }}"{% endif %}',
          body: '{% if message %}{{ message }}{% endif %}',
          link: '{{ deepLink }}',
          action: { label: 'Open the invitation', url: '{{ deepLink }}' },
        },
      },
      templates: {
        ru: {
          subject: 'Вас пригласили в проект',
          textBody: `Здравствуйте, {{ recipientName }}!

{{ actorName }} приглашает вас {% if projectTitle %}в проект «{{ projectTitle }}»{% else %}к сотрудничеству{% endif %}.
{% if message %}
Сообщение: {{ message }}
{% endif %}
Открыть приглашение: {{ deepLink }}`,
          htmlBody: `<p>Здравствуйте, {{ recipientName }}!</p>
<p>{{ actorName }} приглашает вас {% if projectTitle %}в проект «{{ projectTitle }}»{% else %}к сотрудничеству{% endif %}.</p>
{% if message %}<blockquote>{{ message }}</blockquote>
{% endif %}<p><a href="{{ deepLink }}">Открыть приглашение</a></p>`,
        },
        en: {
          subject: 'You are invited to a project',
          textBody: `Hello {{ recipientName }},

{{ actorName }} invites you {% if projectTitle %}to the project "{{ projectTitle }}"{% else %}to work together{% endif %}.
{% if message %}
Message: {{ message }}
{% endif %}
Open the invitation: {{ deepLink }}`,
          htmlBody: `<p>Hello {{ recipientName }},</p>
<p>{{ actorName }} invites you {% if projectTitle %}to the project "{{ projectTitle }}"{% else %}to work together{% endif %}.</p>
{% if message %}<blockquote>{{ message }}</blockquote>
{% endif %}<p><a href="{{ deepLink }}">Open the invitation</a></p>`,
        },
      },
    },
  ],
  intent: ({ payload, traceId }) => ({
    type: 'notify',
    kind: 'InvitationCreated',
    urgency: 'normal',
    recipients: [{ userId: payload.recipient.userId, inline: payload.recipient }],
    model: {
      actorName: payload.actor.displayName,
      projectTitle: payload.projectTitle ?? null,
      message: payload.message ?? null,
      deepLink: payload.deepLink,
    },
    traceId,
    // Withdrawn by invitation.withdrawn of the same invitation.
    cancellationKey: invitationKey(payload.invitationId),
  }),
})
