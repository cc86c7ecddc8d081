/**
 * The example of docs/adding-an-event-type.md, word for word: a `project.closed`
 * event published on RabbitMQ that emails every invited specialist. The test
 * registers it the way src/events/registry.ts lists the built-in ones.
 */
import { z } from 'zod'
import { Actor, Recipient } from '../../src/contracts/arthunt.ts'
import { HttpUrl, Id, Text } from '../../src/contracts/fields.ts'
import { defineEventType } from '../../src/events/define.ts'

/** `data` of `project.closed`: a client closed a project; everyone invited to it is told. */
export const ProjectClosedSchema = z.object({
  projectId: Id.describe('the project'),
  projectTitle: Text.describe('its title'),
  closedBy: Actor.describe('the client who closed it'),
  invitees: z.array(Recipient).min(1).max(100).describe('the specialists invited to it, who are told'),
  deepLink: HttpUrl.describe('where the project can still be read'),
})

/** `project.closed`: one email to each invited specialist. */
export const projectClosed = defineEventType({
  family: 'arthunt',
  type: 'project.closed',
  summary: 'A client closed a project: every specialist invited to it is told.',
  schema: ProjectClosedSchema,
  channels: { rabbitmq: { exchange: 'arthunt.notifications', routingKey: 'notifications.email.project.closed' } },
  example: {
    body: {
      envelope: {
        eventId: '4b7e3c2a-1f0d-4e9b-8a7c-6d5e4f3a2b10',
        eventType: 'project.closed',
        schemaVersion: 1,
        occurredAt: '2026-07-20T09:00:00Z',
        producer: 'arthunt-api',
      },
      data: {
        projectId: '1b64a0f4-0a1c-4d4e-8f90-0c7a1b2c3d4e',
        projectTitle: 'Редизайн лендинга для студии керамики',
        closedBy: { userId: '0c0e2d2a-5c71-4a3f-8a2f-7e9c1b3d4a55', displayName: 'Анна Клиент' },
        invitees: [
          {
            userId: '9f4e8b7a-2c9f-4f1e-b5c3-6d2e1f0a8b77',
            email: 'mikhail.designer@example.com',
            displayName: 'Михаил Дизайнер',
          },
        ],
        deepLink: 'https://arthunt.ru/projects/1b64a0f4',
      },
    },
  },
  kinds: [
    {
      name: 'ProjectClosed',
      summary: 'A project you were invited to is closed',
      category: 'optional',
      templates: {
        ru: {
          subject: 'Проект «{{ projectTitle }}» закрыт',
          textBody:
            'Здравствуйте, {{ recipientName }}!\n\n{{ closedBy }} закрыл проект «{{ projectTitle }}».\n\n{{ deepLink }}',
          htmlBody:
            '<p>Здравствуйте, {{ recipientName }}!</p><p>{{ closedBy }} закрыл проект «{{ projectTitle }}».</p>',
        },
        en: {
          subject: 'The project "{{ projectTitle }}" is closed',
          textBody:
            'Hello {{ recipientName }},\n\n{{ closedBy }} closed the project "{{ projectTitle }}".\n\n{{ deepLink }}',
          htmlBody: '<p>Hello {{ recipientName }},</p><p>{{ closedBy }} closed the project "{{ projectTitle }}".</p>',
        },
      },
    },
  ],
  intent: ({ payload, traceId }) => ({
    type: 'notify',
    kind: 'ProjectClosed',
    urgency: 'normal',
    recipients: payload.invitees.map((invitee) => ({ userId: invitee.userId, inline: invitee })),
    model: { projectTitle: payload.projectTitle, closedBy: payload.closedBy.displayName, deepLink: payload.deepLink },
    traceId,
  }),
})
