/**
 * A test event type that gathers: `task.reminder` tells a user, named by id
 * only, about a task; its kind has a digest and a throttle, and its
 * recipient's address comes from the contact replica — so a reminder can
 * wait for its contact, and its release must keep the digest and the
 * throttle as planning does (test/model/sequences.test.ts).
 */
import { z } from 'zod'
import { Id, Text } from '../../src/contracts/fields.ts'
import { defineEventType } from '../../src/events/define.ts'

const TaskReminderSchema = z.object({ userId: Id, task: Text })

const parts = (subject: string) => ({ subject, textBody: '{{ task }}', htmlBody: '<p>{{ task }}</p>' })

export const taskReminder = defineEventType({
  family: 'arthunt',
  type: 'task.reminder',
  summary: 'A task waits for a user.',
  schema: TaskReminderSchema,
  channels: { rabbitmq: { exchange: 'arthunt.notifications', routingKey: 'notifications.email.task.reminder' } },
  example: {
    body: {
      envelope: {
        eventId: '5c8f4d3b-2a1e-4f0a-9b8c-7d6e5f4a3b21',
        eventType: 'task.reminder',
        schemaVersion: 1,
        occurredAt: '2026-07-20T09:00:00Z',
        producer: 'arthunt-api',
      },
      data: { userId: '0c0e2d2a-5c71-4a3f-8a2f-7e9c1b3d4a55', task: 'Ответить на отклик' },
    },
  },
  kinds: [
    {
      name: 'TaskReminded',
      summary: 'A task waits for you',
      category: 'optional',
      templates: { ru: parts('Напоминание'), en: parts('A reminder') },
      delivery: {
        email: { default: 'instant', digest: { window: { minutes: 10 } }, throttle: { max: 2, windowMinutes: 60 } },
      },
      digestTemplates: {
        ru: { subject: '{{ count }} напоминаний', textBody: '{{ count }}', htmlBody: '<p>{{ count }}</p>' },
        en: { subject: '{{ count }} reminders', textBody: '{{ count }}', htmlBody: '<p>{{ count }}</p>' },
      },
    },
  ],
  intent: ({ payload, traceId }) => ({
    type: 'notify',
    kind: 'TaskReminded',
    urgency: 'normal',
    recipients: [{ userId: payload.userId }],
    model: { task: payload.task },
    traceId,
  }),
})
