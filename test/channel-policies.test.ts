/**
 * `/v1/channel-policies`: an operator turns a kind's channel on or off, and
 * the next event of the kind goes where the policy says — through ingest, the
 * real local queues, D1 and the INBOX Durable Object. Turning one channel on
 * never turns another off, a kind without in-app templates cannot take the
 * in-app channel, and every change is in the audit trail once.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import type { AuditRecord } from '../src/audit/record.ts'
import { adminCall, eventually, freshInbound, notificationsOf, postIngest } from './helpers.ts'

type Policy = { kind: string; urgency: string; channels: string[]; stored: boolean }

const call = (method: string, path: string, body?: unknown) => adminCall(method, path, body)

const policiesOf = async (kind: string) =>
  ((await call('GET', '/v1/channel-policies')).body.items as Policy[]).filter((policy) => policy.kind === kind)

const saves = async (target: string) =>
  (
    (await call('GET', `/v1/audit?action=channel-policy.save&target=${encodeURIComponent(target)}`)).body
      .items as AuditRecord[]
  ).length

describe('channel policies', () => {
  it('turn the in-app channel of a kind on and off; the next event follows, and each change is audited once', async () => {
    expect((await policiesOf('ResponseCreated')).map((policy) => policy.channels)).toEqual([
      ['email'],
      ['email'],
      ['email'],
    ])
    const on = await call('PUT', '/v1/channel-policies/ResponseCreated/in-app', { enabled: true })
    expect(on.status).toBe(200)
    expect(
      (on.body.items as Policy[]).map((policy) => [policy.urgency, policy.channels.sort(), policy.stored]),
    ).toEqual([
      ['low', ['email', 'in-app'], true],
      ['normal', ['email', 'in-app'], true],
      ['high', ['email', 'in-app'], true],
    ])
    // The same again changes nothing, and is not audited again.
    expect((await call('PUT', '/v1/channel-policies/ResponseCreated/in-app', { enabled: true })).status).toBe(200)
    expect(await saves('ResponseCreated/in-app')).toBe(1)
    try {
      const event = freshInbound('response.created')
      const { envelope, data } = JSON.parse(event.body) as {
        envelope: { eventId: string }
        data: { recipient: { userId: string } }
      }
      expect((await postIngest({ events: [event] })).status).toBe(202)
      const rows = await eventually(async () => {
        const found = await notificationsOf(envelope.eventId)
        expect(found.map((row) => row.channel).sort()).toEqual(['email', 'in-app'])
        return found
      })
      const inApp = rows.find((row) => row.channel === 'in-app')
      await eventually(async () => {
        const { items } = await env.INBOX.getByName(data.recipient.userId).page({ limit: 10, archived: true })
        expect(items.map((item) => item.id)).toEqual([inApp?.id])
      })
    } finally {
      expect((await call('PUT', '/v1/channel-policies/ResponseCreated/in-app', { enabled: false })).status).toBe(200)
    }
    expect(await saves('ResponseCreated/in-app')).toBe(2)
    const event = freshInbound('response.created')
    const { envelope } = JSON.parse(event.body) as { envelope: { eventId: string } }
    expect((await postIngest({ events: [event] })).status).toBe(202)
    await eventually(async () => {
      expect((await notificationsOf(envelope.eventId)).map((row) => row.channel)).toEqual(['email'])
    })
  })

  it("keeps a kind's default channels when one is turned on where nothing was stored", async () => {
    const db = env.DB
    await db.prepare("DELETE FROM channel_policies WHERE kind = 'ResponseCreated' AND urgency = 'low'").run()
    try {
      expect((await policiesOf('ResponseCreated')).find((policy) => policy.urgency === 'low')).toMatchObject({
        channels: ['email'],
        stored: false,
      })
      const on = await call('PUT', '/v1/channel-policies/ResponseCreated/in-app', { enabled: true, urgencies: ['low'] })
      expect(on.status).toBe(200)
      const low = (on.body.items as Policy[]).find((policy) => policy.urgency === 'low')
      expect(low?.channels.sort()).toEqual(['email', 'in-app'])
      expect(low?.stored).toBe(true)
      // The other urgencies are as they were.
      expect((on.body.items as Policy[]).find((policy) => policy.urgency === 'normal')?.channels).toEqual(['email'])
    } finally {
      await db
        .prepare(
          "INSERT OR REPLACE INTO channel_policies (kind, urgency, channel, enabled) VALUES ('ResponseCreated', 'low', 'email', 1), ('ResponseCreated', 'low', 'in-app', 0)",
        )
        .run()
    }
  })

  it('refuses the in-app channel of a kind without in-app templates, an unknown kind or channel, and a bad body', async () => {
    const noTemplates = await call('PUT', '/v1/channel-policies/VerificationApproved/in-app', { enabled: true })
    expect(noTemplates.status).toBe(400)
    expect(noTemplates.body).toMatchObject({ error: { code: 'INVALID_REQUEST' } })
    expect(JSON.stringify(noTemplates.body)).toMatch(/no in-app templates/)
    expect((await call('PUT', '/v1/channel-policies/NoSuchKind/email', { enabled: true })).status).toBe(400)
    expect((await call('PUT', '/v1/channel-policies/ResponseCreated/sms', { enabled: true })).status).toBe(400)
    const bad = await call('PUT', '/v1/channel-policies/ResponseCreated/email', { enabled: 'yes' })
    expect(bad.status).toBe(400)
    expect(JSON.stringify(bad.body)).toMatch(/enabled/)
    expect(
      (await call('PUT', '/v1/channel-policies/ResponseCreated/email', { enabled: true, urgencies: [] })).status,
    ).toBe(400)
    expect((await policiesOf('VerificationApproved')).every((policy) => !policy.channels.includes('in-app'))).toBe(true)
  })
})
