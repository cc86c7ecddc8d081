/**
 * Every request the `resend` transport can make, checked against Resend's own
 * published OpenAPI document (vendored unchanged in test/fixtures/resend-openapi/),
 * not against our idea of it. The stand-ins for Resend (test/fake-resend.ts,
 * support/provider-fake.ts) refuse what the same check refuses.
 */
import { describe, expect, it } from 'vitest'
import { resendTransport } from '../src/dispatch/transports/resend.ts'
import { checkResendDomain } from '../src/health/resend-domains.ts'
import type { Mail } from '../src/mail/mime.ts'
import { schemaValidator } from '../support/openapi-check.ts'
import { type ResendDocument, type ResendRequest, resendContract } from '../support/resend-contract.ts'
import { FAKE_RESEND_DOMAINS, FAKE_RESEND_KEYS, FAKE_RESEND_URL } from './fake-resend.ts'
import doc from './fixtures/resend-openapi/resend.json'

const contract = resendContract(doc as unknown as ResendDocument)

/** A `fetch` that records each request as Resend would receive it in `seen`, and answers 200 with `answer`. */
function recording(seen: ResendRequest[], answer: unknown): typeof fetch {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init)
    seen.push({
      method: request.method,
      path: new URL(request.url).pathname,
      headers: Object.fromEntries(request.headers),
      body: await request.text(),
    })
    return Response.json(answer)
  }) as typeof fetch
}

/** The requests a transport sends for these mails, as Resend would receive them (answered 200); `batch`: in one. */
async function requestsFor(mails: Mail[], baseUrl = 'https://api.resend.com', batch = false): Promise<ResendRequest[]> {
  const seen: ResendRequest[] = []
  const answer = batch ? { data: mails.map((_, i) => ({ id: `re_${i}` })) } : { id: 're_test' }
  const transport = resendTransport({ apiKey: 're_test_key', baseUrl }, recording(seen, answer))
  if (batch) await transport.sendBatch?.(mails, 'bat_0123456789abcdef0123456789abcdef')
  else for (const mail of mails) await transport.send(mail)
  return seen
}

const base: Mail = {
  notificationId: 'ntf_0123456789abcdef0123456789abcdef',
  from: { address: 'notifications@notify-edge.example', name: 'ArtHunt' },
  to: { address: 'anna@example.com', name: 'Анна Клиент' },
  subject: 'Новый отклик на ваш проект',
  text: 'Текст',
  html: '<p>Текст</p>',
  unsubscribeUrl: null,
}

describe("the resend transport keeps Resend's published contract", () => {
  it('every kind of mail it sends is a request the document allows', async () => {
    const requests = await requestsFor([
      base,
      { ...base, unsubscribeUrl: 'https://notify-edge.example.workers.dev/u/v1.token.mac' },
      { ...base, subject: 'Я'.repeat(400), to: { address: 'anna@example.com', name: null } },
      { ...base, from: { address: base.from.address, name: 'ArtHunt, Inc. "Notifications"' } },
      { ...base, text: '', html: '' },
    ])
    expect(requests).toHaveLength(5)
    for (const request of requests) {
      expect(request).toMatchObject({ method: 'POST', path: '/emails' })
      expect(contract.check(request)).toEqual([])
      expect(request.headers['user-agent']).toMatch(/^notify-edge\/\d+\.\d+\.\d+$/)
      expect(request.headers['idempotency-key']).toBe(base.notificationId)
    }
  })

  it('a batch of every kind of mail is one request the document allows, under the batch id', async () => {
    const mails = [
      base,
      { ...base, notificationId: 'ntf_1', unsubscribeUrl: 'https://notify-edge.example.workers.dev/u/v1.token.mac' },
      { ...base, notificationId: 'ntf_2', to: { address: 'anna@example.com', name: null } },
      { ...base, notificationId: 'ntf_3', from: { address: base.from.address, name: 'ArtHunt, Inc. "Notifications"' } },
    ]
    const requests = await requestsFor(mails, 'https://api.resend.com', true)
    expect(requests).toHaveLength(1)
    const [request] = requests as [ResendRequest]
    expect(request).toMatchObject({ method: 'POST', path: '/emails/batch' })
    expect(contract.check(request)).toEqual([])
    expect(request.headers['idempotency-key']).toBe('bat_0123456789abcdef0123456789abcdef')
    expect((JSON.parse(request.body) as unknown[]).length).toBe(4)
    // Over 100, or a field a batch does not take: refused by the same check.
    const body = JSON.parse(request.body) as Record<string, unknown>[]
    const many = Array.from({ length: 101 }, () => body[0])
    expect(contract.check({ ...request, body: JSON.stringify(many) })).toEqual(['a batch of 101 emails (at most 100)'])
  })

  it('a base URL with a path keeps it (a proxy in front of Resend)', async () => {
    const [request] = await requestsFor([base], 'https://proxy.example/resend/')
    expect(request?.path).toBe('/resend/emails')
  })

  it("the check refuses what Resend's document and reference refuse", async () => {
    const [request] = (await requestsFor([base])) as [ResendRequest]
    const body = JSON.parse(request.body) as Record<string, unknown>
    const without = (key: string) => JSON.stringify(Object.fromEntries(Object.entries(body).filter(([k]) => k !== key)))
    expect(contract.check({ ...request, body: without('subject') })).not.toEqual([])
    expect(contract.check({ ...request, body: JSON.stringify({ ...body, to: [] }) })).not.toEqual([])
    expect(contract.check({ ...request, body: JSON.stringify({ ...body, headers: 'X-A: b' }) })).not.toEqual([])
    expect(contract.check({ ...request, headers: { ...request.headers, 'idempotency-key': 'k'.repeat(257) } })).toEqual(
      ['header Idempotency-Key breaks its schema'],
    )
    const { 'user-agent': _, ...noAgent } = request.headers
    expect(contract.check({ ...request, headers: noAgent })).toEqual(['no User-Agent (Resend answers 403, error 1010)'])
    expect(contract.check({ ...request, path: '/email' })).toEqual(["POST /email is not in Resend's API"])
  })
})

describe("the doctor's domain check keeps Resend's contract, and the fake answers it as documented", () => {
  it('GET /domains carries a User-Agent and the bearer key, as the document and reference require', async () => {
    const seen: ResendRequest[] = []
    const fetcher = recording(seen, {
      object: 'list',
      has_more: false,
      data: [{ name: 'mail.acme.dev', status: 'verified' }],
    })
    const check = await checkResendDomain(
      { apiKey: 're_test_key', baseUrl: 'https://api.resend.com' },
      'mail.acme.dev',
      fetcher,
    )
    expect(check).toEqual({ outcome: 'verified' })
    expect(seen).toHaveLength(1)
    expect(seen[0]).toMatchObject({ method: 'GET', path: '/domains' })
    expect(contract.check(seen[0] as ResendRequest)).toEqual([])
  })

  it("the fake's list matches ListDomainsResponse; a sending-only key gets 401 restricted_api_key", async () => {
    const schemas = (doc as unknown as { components: { schemas: Record<string, object> } }).components
    const validate = schemaValidator(schemas)
    const call = (key: string) =>
      fetch(`${FAKE_RESEND_URL}/domains`, { headers: { authorization: `Bearer ${key}`, 'user-agent': 'test' } })
    const listed = await call(FAKE_RESEND_KEYS.full)
    expect(listed.status).toBe(200)
    const body = (await listed.json()) as { data: { name: string; status: string }[] }
    expect(validate(schemas.schemas.ListDomainsResponse as object, body).errors).toEqual([])
    expect(body.data.map((domain) => [domain.name, domain.status])).toEqual([
      [FAKE_RESEND_DOMAINS.verified, 'verified'],
      [FAKE_RESEND_DOMAINS.pending, 'pending'],
    ])
    const restricted = await call(FAKE_RESEND_KEYS.sending)
    expect(restricted.status).toBe(401)
    expect(await restricted.json()).toMatchObject({ name: 'restricted_api_key' })
  })
})
