import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { deliver, eventually, freshInbound, notificationsOf, parseMime, postIngest, sentMessagesOf } from './helpers.ts'

function eventIdOf(event: { body: string }): string {
  return JSON.parse(event.body).envelope.eventId
}

/** Posts events through ingest and waits until each has its emails handed to the transport. */
async function deliverAndWait(events: { body: string }[], count = 1) {
  const response = await postIngest({ events })
  expect(response.status).toBe(202)
  const eventId = eventIdOf(events[0] as { body: string })
  return eventually(async () => {
    const sent = await sentMessagesOf(eventId)
    expect(sent).toHaveLength(count)
    return sent
  })
}

describe('ArtHunt email events (AH-MVP-007, AH-MVP-006)', () => {
  it('response.created → one email to the project owner with the sample data', async () => {
    const event = freshInbound('response.created')
    const [sent] = await deliverAndWait([event])
    const mail = parseMime(sent?.raw as string)
    expect(mail.headers.to).toBe('Анна Клиент <anna.client@example.com>')
    expect(mail.headers.from).toBe('ArtHunt <notifications@notify-edge.example>')
    expect(mail.headers.subject).toBe('Новый отклик на ваш проект')
    expect(mail.headers['message-id']).toBe(`<${sent?.notification_id}@notify-edge.example>`)
    expect(mail.text).toContain('Редизайн лендинга для студии керамики')
    expect(mail.text).toContain('Михаил Дизайнер')
    expect(mail.text).toContain('45\u00a0000\u00a0₽')
    expect(mail.text).toContain('14 дней')
    expect(mail.text).toContain('https://arthunt.ru/projects/.../responses')
    expect(mail.html).toContain('<a href="https://arthunt.ru/projects/.../responses">')
    const [row] = await notificationsOf(eventIdOf(event))
    expect(row).toMatchObject({ kind: 'ResponseCreated', status: 'sent', urgency: 'normal', locale: 'ru' })
  })

  it('invitation.created → one email to the specialist with the message', async () => {
    const event = freshInbound('invitation.created')
    const [sent] = await deliverAndWait([event])
    const mail = parseMime(sent?.raw as string)
    expect(mail.headers.to).toBe('Михаил Дизайнер <mikhail.designer@example.com>')
    expect(mail.headers.subject).toBe('Вас пригласили в проект')
    expect(mail.text).toContain('Анна Клиент приглашает вас в проект «Редизайн лендинга для студии керамики»')
    expect(mail.text).toContain('Добрый день! Ваш стиль идеально подходит под наш проект.')
    expect(mail.html).toContain('<blockquote>Добрый день! Ваш стиль идеально подходит под наш проект.</blockquote>')
  })

  it('escapes every value in the HTML part, and keeps it as typed in the text part', async () => {
    const message = '<script>alert("x")</script> & <b>bold</b>'
    const event = freshInbound('invitation.created', (value) => {
      const data = value.data as Record<string, unknown>
      data.message = message
      data.projectTitle = 'Tom & Jerry <studio>'
    })
    const [sent] = await deliverAndWait([event])
    const mail = parseMime(sent?.raw as string)
    expect(mail.html).toContain('&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;')
    expect(mail.html).toContain('Tom &amp; Jerry &lt;studio&gt;')
    expect(mail.html).not.toContain('<script>')
    expect(mail.text).toContain(message)
  })

  it('the same event delivered three times → one notification, one email', async () => {
    const event = freshInbound('response.created')
    const eventId = eventIdOf(event)
    const key = `arthunt:response.created:${eventId}`
    await deliverAndWait([event])
    expect(await env.IDEMPOTENCY.get(key)).toBe('1')
    // Second delivery: the KV fast path knows it.
    expect((await deliver({ ...event, sourceMessageId: 'again-1' }, 1)).explicitAcks).toHaveLength(1)
    // Third delivery, with the KV mark gone (expired, or lost): D1 decides, and KV learns it again.
    await env.IDEMPOTENCY.delete(key)
    expect((await deliver({ ...event, sourceMessageId: 'again-2' }, 1)).explicitAcks).toHaveLength(1)
    expect(await env.IDEMPOTENCY.get(key)).toBe('1')
    const rows = await notificationsOf(eventId)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ status: 'sent' })
    expect(await sentMessagesOf(eventId)).toHaveLength(1)
    expect(rows[0]).toMatchObject({ send_attempts: 1 })
  })

  it('the same event twice in one ingest request → one notification', async () => {
    const event = freshInbound('invitation.created')
    await deliverAndWait([event, { ...event, sourceMessageId: 'twin' }])
    expect(await notificationsOf(eventIdOf(event))).toHaveLength(1)
  })

  it('an event without a price or deadline leaves those lines out', async () => {
    const event = freshInbound('response.created', (value) => {
      const data = value.data as Record<string, unknown>
      delete data.proposedPrice
      data.proposedDeadlineDays = null
    })
    const [sent] = await deliverAndWait([event])
    const mail = parseMime(sent?.raw as string)
    expect(mail.text).not.toContain('Предложенная цена')
    expect(mail.text).not.toContain('Срок')
  })
})
