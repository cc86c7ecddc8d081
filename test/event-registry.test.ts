import { env } from 'cloudflare:workers'
import { beforeAll, describe, expect, it } from 'vitest'
import { eventTypes, kindNames, registerEventType } from '../src/events/registry.ts'
import { exampleModelOf } from '../src/templates/examples.ts'
import { projectClosed } from './event-types/project-closed.ts'
import { eventually, guid, inbound, parseMime, postIngest } from './helpers.ts'

describe('an event type added through the registry', () => {
  beforeAll(() => registerEventType(projectClosed))

  it('project.closed, one module and its registration: posted to ingest, every invited specialist gets an email', async () => {
    const invitees = ['a', 'b', 'c'].map((name) => ({
      userId: guid(),
      email: `invitee-${name}-${guid().slice(0, 6)}@example.com`,
      displayName: `Специалист ${name.toUpperCase()}`,
    }))
    const body = structuredClone(projectClosed.example.body) as {
      envelope: { eventId: string }
      data: { invitees: unknown }
    }
    body.envelope.eventId = guid()
    body.data.invitees = invitees
    expect((await postIngest({ events: [inbound(body)] })).status).toBe(202)
    const sent = await eventually(async () => {
      const { results } = await env.DB.prepare(
        `SELECT n.recipient_user_id, s.raw FROM notifications n JOIN sent_messages s ON s.notification_id = n.id
         WHERE n.event_id = ?1 AND n.kind = 'ProjectClosed' AND n.status = 'sent'`,
      )
        .bind(body.envelope.eventId)
        .all<{ recipient_user_id: string; raw: string }>()
      expect(results).toHaveLength(3)
      return results
    })
    expect(sent.map((row) => row.recipient_user_id).sort()).toEqual(invitees.map((invitee) => invitee.userId).sort())
    for (const { raw } of sent) {
      // Its default template (ru: no contact, DEFAULT_LOCALE ru), with the event's data.
      expect(parseMime(raw).headers.subject).toBe('Проект «Редизайн лендинга для студии керамики» закрыт')
    }
  })

  it('everything that reads the registry sees it: kinds, the template example, a bad event named by its field', async () => {
    expect(eventTypes().map((type) => type.type)).toContain('project.closed')
    expect(kindNames()).toContain('ProjectClosed')
    expect(exampleModelOf('ProjectClosed')).toMatchObject({ closedBy: 'Анна Клиент', recipientName: 'Михаил Дизайнер' })
    const broken = structuredClone(projectClosed.example.body) as {
      envelope: { eventId: string }
      data: Record<string, unknown>
    }
    broken.envelope.eventId = guid()
    broken.data.invitees = []
    expect((await postIngest({ events: [inbound(broken)] })).status).toBe(202)
    await eventually(async () => {
      const row = await env.DB.prepare('SELECT code, error FROM dead_letters WHERE event_id = ?1')
        .bind(broken.envelope.eventId)
        .first<{ code: string; error: string }>()
      expect(row).toMatchObject({ code: 'NTF_INVALID_PAYLOAD', error: expect.stringContaining('data.invitees') })
    })
  })

  it('refuses a second definition of a registered type or kind', () => {
    expect(() => registerEventType(projectClosed)).toThrow(/registered already/)
  })
})
