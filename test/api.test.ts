import { describe, expect, it } from 'vitest'
import { asyncApiDocument } from '../src/events/asyncapi.ts'
import { ADMIN_TOKEN, guid, INGEST_TOKEN } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

function call(method: string, path: string, token: string | null, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = {}
  if (token) headers.authorization = `Bearer ${token}`
  if (body !== undefined) headers['content-type'] = 'application/json'
  return fetchWorker(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  })
}

const admin = (method: string, path: string, body?: unknown) => call(method, path, ADMIN_TOKEN, body)

async function jsonOf<T = Record<string, unknown>>(response: Response): Promise<T> {
  return (await response.json()) as T
}

const user = '0c0e2d2a-5c71-4a3f-8a2f-7e9c1b3d4a55'
const template = {
  subject: 'Тема {{ actorName }}',
  textBody: 'Текст {{ projectTitle }}',
  htmlBody: '<p>{{ projectTitle }}</p>',
}

/** Every operator route, with a request the admin token may make (expected status). */
const ROUTES: { method: string; path: string; body?: unknown; admin: number }[] = [
  { method: 'GET', path: '/v1/dead-letters', admin: 200 },
  { method: 'GET', path: '/v1/dead-letters/none', admin: 404 },
  { method: 'POST', path: '/v1/dead-letters/none/replay', admin: 404 },
  { method: 'POST', path: '/v1/dead-letters/none/discard', body: { reason: 'test' }, admin: 404 },
  { method: 'POST', path: '/v1/dead-letters/replay', body: { dryRun: true }, admin: 200 },
  { method: 'GET', path: '/v1/events/none', admin: 404 },
  { method: 'GET', path: '/v1/notifications/none', admin: 404 },
  { method: 'GET', path: '/v1/templates/ResponseCreated/ru/email', admin: 200 },
  { method: 'PUT', path: '/v1/templates/ResponseCreated/xx/email', body: template, admin: 200 },
  { method: 'POST', path: '/v1/templates/preview', body: { kind: 'ResponseCreated' }, admin: 200 },
  { method: 'GET', path: `/v1/contacts/${user}`, admin: 404 },
  { method: 'PUT', path: `/v1/contacts/${guid()}`, body: { email: 'someone@example.com' }, admin: 200 },
  { method: 'DELETE', path: `/v1/contacts/${guid()}`, admin: 404 },
  { method: 'GET', path: '/v1/reviewers', admin: 200 },
  { method: 'PUT', path: `/v1/reviewers/${guid()}`, admin: 200 },
  { method: 'DELETE', path: `/v1/reviewers/${guid()}`, admin: 404 },
  { method: 'GET', path: '/v1/channel-policies', admin: 200 },
  // Off already (migration 0024): a change of nothing.
  { method: 'PUT', path: '/v1/channel-policies/ResponseCreated/in-app', body: { enabled: false }, admin: 200 },
  { method: 'POST', path: '/v1/cancellations', body: { key: 'api-test:nothing' }, admin: 200 },
  {
    method: 'POST',
    path: '/v1/cancellations/bulk',
    body: { filter: { keyPrefix: 'api-test:none:' } },
    admin: 200,
  },
  { method: 'GET', path: '/v1/health/config', admin: 200 },
  { method: 'GET', path: '/metrics', admin: 200 },
]

describe('operator API: scopes', () => {
  for (const route of ROUTES) {
    it(`${route.method} ${route.path}: 401 without or with an unknown token, 403 with the ingest token, ${route.admin} with the admin token`, async () => {
      for (const token of [null, 'not-a-known-token-0000']) {
        const response = await call(route.method, route.path, token, route.body)
        expect(response.status).toBe(401)
        expect(await jsonOf(response)).toMatchObject({ error: { code: 'UNAUTHORIZED' } })
      }
      const ingest = await call(route.method, route.path, INGEST_TOKEN, route.body)
      expect(ingest.status).toBe(403)
      expect(await jsonOf(ingest)).toMatchObject({ error: { code: 'FORBIDDEN' } })
      const allowed = await call(route.method, route.path, ADMIN_TOKEN, route.body)
      expect(allowed.status).toBe(route.admin)
      expect(allowed.headers.get('x-content-type-options')).toBe('nosniff')
    })
  }

  it("/healthz, /openapi.json and /asyncapi.json need no token; the AsyncAPI document is the registry's", async () => {
    expect((await call('GET', '/healthz', null)).status).toBe(200)
    expect((await call('GET', '/openapi.json', null)).status).toBe(200)
    const asyncapi = await call('GET', '/asyncapi.json', null)
    expect(asyncapi.status).toBe(200)
    expect(await asyncapi.json()).toEqual(asyncApiDocument())
  })

  it('operator request bodies are limited to 1 MiB (413)', async () => {
    const body = { subject: 's', textBody: 'x'.repeat(1024 * 1024), htmlBody: 'h' }
    const response = await call('PUT', '/v1/templates/ResponseCreated/ru/email', ADMIN_TOKEN, body)
    expect(response.status).toBe(413)
    expect(await jsonOf(response)).toMatchObject({ error: { code: 'PAYLOAD_TOO_LARGE' } })
  })

  it('a bad request names the field', async () => {
    const response = await admin('GET', '/v1/dead-letters?limit=0&status=lost')
    expect(response.status).toBe(400)
    const body = await jsonOf<{ error: { code: string; issues: { field: string }[] } }>(response)
    expect(body.error.code).toBe('INVALID_REQUEST')
    expect(body.error.issues.map((issue) => issue.field).sort()).toEqual(['limit', 'status'])
  })
})

describe('/openapi.json', () => {
  it('is an OpenAPI 3 document listing every route with its error responses', async () => {
    const doc = await jsonOf<{
      openapi: string
      info: { title: string }
      paths: Record<
        string,
        Record<string, { responses: Record<string, { description: string }>; security?: unknown[] }>
      >
      components: { securitySchemes: Record<string, unknown> }
    }>(await call('GET', '/openapi.json', null))
    expect(doc.openapi).toMatch(/^3\.1\.\d$/)
    expect(doc.info.title).toBe('notify-edge')
    const listed = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
    )
    expect(listed.sort()).toEqual(
      [
        'GET /healthz',
        'GET /openapi.json',
        'GET /asyncapi.json',
        'POST /v1/ingest',
        'GET /v1/dead-letters',
        'GET /v1/dead-letters/{id}',
        'POST /v1/dead-letters/{id}/replay',
        'POST /v1/dead-letters/{id}/discard',
        'POST /v1/dead-letters/replay',
        'POST /v1/dead-letters/discard',
        'GET /v1/events/{eventId}',
        'GET /v1/notifications/{id}',
        'GET /v1/templates/{kind}/{locale}/{channel}',
        'PUT /v1/templates/{kind}/{locale}/{channel}',
        'POST /v1/templates/preview',
        'GET /v1/contacts/{userId}',
        'PUT /v1/contacts/{userId}',
        'DELETE /v1/contacts/{userId}',
        'GET /v1/reviewers',
        'PUT /v1/reviewers/{userId}',
        'DELETE /v1/reviewers/{userId}',
        'GET /v1/channel-policies',
        'PUT /v1/channel-policies/{kind}/{channel}',
        'POST /v1/cancellations',
        'POST /v1/cancellations/bulk',
        'GET /v1/suppressions',
        'GET /v1/suppressions/{address}',
        'PUT /v1/suppressions/{address}',
        'DELETE /v1/suppressions/{address}',
        'GET /v1/preferences/{userId}',
        'PUT /v1/preferences/{userId}',
        'POST /v1/erasures',
        'POST /v1/webhooks/resend',
        'GET /u/{token}',
        'POST /u/{token}',
        'GET /v1/audit',
        'GET /v1/health/config',
        'POST /v1/shards/grow',
        'GET /v1/inbox',
        'GET /v1/inbox/socket',
        'POST /v1/inbox/seen',
        'POST /v1/inbox/read',
        'POST /v1/inbox/archived',
        'GET /metrics',
      ].sort(),
    )
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          expect(response.description, `${method} ${path} ${status}`).toBeTruthy()
        }
        // Public documents, the links recipients click, and webhooks proved by their signature: no bearer token.
        // An end user's inbox: their token or nothing, no scope to lack.
        if (path === '/v1/webhooks/resend' || path.startsWith('/v1/inbox')) {
          expect(Object.keys(operation.responses)).toContain('401')
        } else if (!['/healthz', '/openapi.json', '/asyncapi.json', '/u/{token}'].includes(path)) {
          expect(Object.keys(operation.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['401', '403']))
          for (const requirement of operation.security ?? []) {
            for (const scheme of Object.keys(requirement as object))
              expect(doc.components.securitySchemes).toHaveProperty(scheme)
          }
        }
      }
    }
  })
})
