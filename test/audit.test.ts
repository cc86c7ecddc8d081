import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import type { AuditRecord } from '../src/audit/record.ts'
import { ADMIN_TOKEN, freshInbound, guid, INGEST_TOKEN, storeDeadLetters } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const VIEWER_TOKEN = 'test-viewer-token-0123456789'

/** The fields of the answers these tests read (each answer has some of them). */
type Body = {
  error: { code: string; message: string; issues: { field: string }[] }
  items: (AuditRecord & { id: number | string })[]
  nextCursor: string | null
  status: string
  replayed: string[]
}
const withViewer = { VIEWER_TOKEN }

async function call(
  method: string,
  path: string,
  token: string | null,
  body?: unknown,
  vars: Record<string, string> = withViewer,
  headers: Record<string, string> = {},
) {
  const response = await fetchWorker(
    path,
    {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    },
    vars,
  )
  const text = await response.text()
  const json = (response.headers.get('content-type') ?? '').includes('json')
  return { status: response.status, body: (json ? JSON.parse(text) : null) as Body }
}

/** One open dead letter, through the dead-letter consumer; its id. */
async function deadLetter(code = `NTF_TEST_${guid().slice(0, 6).toUpperCase()}`): Promise<string> {
  await storeDeadLetters(1, code)
  const { body } = await call('GET', `/v1/dead-letters?code=${code}&order=desc&limit=1`, ADMIN_TOKEN)
  return String(body.items[0]?.id)
}

const auditRows = async (query: string) =>
  (await call('GET', `/v1/audit?${query}`, ADMIN_TOKEN)).body.items as AuditRecord[]

describe('the viewer token', () => {
  it('reads every list and record, previews templates, and is refused every change with 403', async () => {
    const id = await deadLetter()
    for (const path of ['/v1/dead-letters', `/v1/dead-letters/${id}`, '/v1/audit', '/v1/suppressions', '/metrics']) {
      expect((await call('GET', path, VIEWER_TOKEN)).status, path).toBe(200)
    }
    const preview = await call('POST', '/v1/templates/preview', VIEWER_TOKEN, {
      kind: 'ResponseCreated',
      locale: 'ru',
    })
    expect(preview.status).toBe(200)
    const writesBefore = await env.DB.prepare('SELECT count(*) AS n FROM audit_log').first<{ n: number }>()
    const changes: [string, string, unknown][] = [
      ['POST', `/v1/dead-letters/${id}/replay`, {}],
      ['POST', `/v1/dead-letters/${id}/discard`, { reason: 'viewer tries' }],
      ['POST', '/v1/dead-letters/replay', { dryRun: false }],
      ['PUT', '/v1/templates/ResponseCreated/ru/email', { subject: 's', textBody: 't', htmlBody: '<p>h</p>' }],
      ['PUT', `/v1/contacts/${guid()}`, { email: 'viewer-test@example.com' }],
      ['PUT', '/v1/suppressions/viewer-test%40example.com', { reason: 'no' }],
      ['DELETE', `/v1/reviewers/${guid()}`, undefined],
    ]
    for (const [method, path, body] of changes) {
      const answer = await call(method, path, VIEWER_TOKEN, body)
      expect(answer.status, `${method} ${path}`).toBe(403)
      expect(answer.body.error.code).toBe('FORBIDDEN')
    }
    expect((await call('GET', `/v1/dead-letters/${id}`, ADMIN_TOKEN)).body.status).toBe('open')
    expect(await env.DB.prepare('SELECT count(*) AS n FROM audit_log').first<{ n: number }>()).toEqual(writesBefore)
  })

  it('without VIEWER_TOKEN set, its value is just an unknown token', async () => {
    const unset = { VIEWER_TOKEN: undefined } as unknown as Record<string, string>
    expect((await call('GET', '/v1/dead-letters', VIEWER_TOKEN, undefined, unset)).status).toBe(401)
  })
})

describe('token rotation without downtime', () => {
  const NEW_ADMIN = 'rotated-admin-token-0123456789'
  const NEW_INGEST = 'rotated-ingest-token-0123456789'
  const NEW_VIEWER = 'rotated-viewer-token-0123456789'
  const during = {
    ADMIN_TOKEN: NEW_ADMIN,
    ADMIN_TOKEN_PREVIOUS: ADMIN_TOKEN,
    INGEST_TOKEN: NEW_INGEST,
    INGEST_TOKEN_PREVIOUS: INGEST_TOKEN,
    VIEWER_TOKEN: NEW_VIEWER,
    VIEWER_TOKEN_PREVIOUS: VIEWER_TOKEN,
  }
  const after = { ADMIN_TOKEN: NEW_ADMIN, INGEST_TOKEN: NEW_INGEST, VIEWER_TOKEN: NEW_VIEWER }
  const ingest = (token: string, vars: Record<string, string>) =>
    call('POST', '/v1/ingest', token, { events: [freshInbound('response.created')] }, vars)

  it('during the rotation both values of each token work, each in its own scope; after it only the new one', async () => {
    for (const token of [ADMIN_TOKEN, NEW_ADMIN]) {
      expect((await call('PUT', `/v1/reviewers/${guid()}`, token, undefined, during)).status).toBe(200)
    }
    for (const token of [VIEWER_TOKEN, NEW_VIEWER]) {
      expect((await call('GET', '/v1/reviewers', token, undefined, during)).status).toBe(200)
      expect((await call('PUT', `/v1/reviewers/${guid()}`, token, undefined, during)).status).toBe(403)
    }
    for (const token of [INGEST_TOKEN, NEW_INGEST]) {
      expect((await ingest(token, during)).status).toBe(202)
      expect((await call('GET', '/v1/reviewers', token, undefined, during)).status).toBe(403)
    }
    // The previous values removed: refused as unknown, the new ones still work.
    expect((await call('GET', '/v1/reviewers', ADMIN_TOKEN, undefined, after)).status).toBe(401)
    expect((await call('GET', '/v1/reviewers', VIEWER_TOKEN, undefined, after)).status).toBe(401)
    expect((await ingest(INGEST_TOKEN, after)).status).toBe(401)
    expect((await call('GET', '/v1/reviewers', NEW_ADMIN, undefined, after)).status).toBe(200)
    expect((await ingest(NEW_INGEST, after)).status).toBe(202)
  })

  it('a previous value equal to another token is a configuration error naming it', async () => {
    const answer = await call('GET', '/v1/reviewers', ADMIN_TOKEN, undefined, {
      VIEWER_TOKEN,
      ADMIN_TOKEN_PREVIOUS: VIEWER_TOKEN,
    })
    expect(answer.status).toBe(500)
    expect(answer.body.error.code).toBe('CONFIG_INVALID')
    expect(answer.body.error.message).toMatch(/ADMIN_TOKEN_PREVIOUS|VIEWER_TOKEN/)
  })
})

describe('the audit trail', () => {
  it('records each change with who, what, target, parameters and rows affected — and nothing for a change that found nothing', async () => {
    const since = new Date().toISOString()
    const id = await deadLetter()
    const user = guid()
    const address = `audit-${guid().slice(0, 8)}@example.com`
    expect((await call('POST', `/v1/dead-letters/${id}/discard`, ADMIN_TOKEN, { reason: 'test data' })).status).toBe(
      200,
    )
    expect(
      (
        await call('PUT', '/v1/templates/ResponseCreated/en/email', ADMIN_TOKEN, {
          subject: 'New response',
          textBody: 'Hello',
          htmlBody: '<p>Hello</p>',
        })
      ).status,
    ).toBe(200)
    expect((await call('PUT', `/v1/contacts/${user}`, ADMIN_TOKEN, { email: address, locale: 'ru' })).status).toBe(200)
    expect((await call('PUT', `/v1/reviewers/${user}`, ADMIN_TOKEN)).status).toBe(200)
    // Already in the pool: nothing changed, nothing recorded.
    expect((await call('PUT', `/v1/reviewers/${user}`, ADMIN_TOKEN)).status).toBe(200)
    expect(
      (await call('PUT', `/v1/suppressions/${encodeURIComponent(address)}`, ADMIN_TOKEN, { reason: 'asked' })).status,
    ).toBe(200)
    expect((await call('DELETE', `/v1/suppressions/${encodeURIComponent(address)}`, ADMIN_TOKEN)).status).toBe(204)
    expect(
      (
        await call('PUT', `/v1/preferences/${user}`, ADMIN_TOKEN, {
          preferences: [
            { kind: 'ResponseCreated', channel: 'email', enabled: false },
            { kind: 'InvitationCreated', channel: 'email', enabled: false },
          ],
        })
      ).status,
    ).toBe(200)
    // Through the CLI's client: recorded as such.
    expect(
      (
        await call('DELETE', `/v1/contacts/${user}`, ADMIN_TOKEN, undefined, withViewer, {
          'user-agent': 'notify-edge-cli/0.1.0',
        })
      ).status,
    ).toBe(204)
    // Refused or empty: no row.
    expect((await call('DELETE', `/v1/contacts/${guid()}`, ADMIN_TOKEN)).status).toBe(404)
    expect((await call('POST', `/v1/dead-letters/${guid()}/discard`, ADMIN_TOKEN, { reason: 'x' })).status).toBe(404)

    const rows = (await auditRows(`since=${since}&limit=100`)).filter((row) =>
      [id, user, address, 'ResponseCreated/en/email'].includes(row.target ?? ''),
    )
    expect(rows.map((row) => [row.action, row.target, row.affected, row.via])).toEqual([
      ['contact.delete', user, 1, 'cli'],
      ['preferences.put', user, 2, 'api'],
      ['suppression.delete', address, 1, 'api'],
      ['suppression.put', address, 1, 'api'],
      ['reviewer.add', user, 1, 'api'],
      ['contact.put', user, 1, 'api'],
      ['template.save', 'ResponseCreated/en/email', 1, 'api'],
      ['dead-letter.discard', id, 1, 'api'],
    ])
    for (const row of rows) expect(row).toMatchObject({ actor: 'admin token', role: 'admin' })
    expect(rows.find((row) => row.action === 'dead-letter.discard')?.parameters).toEqual({ reason: 'test data' })
    expect(rows.find((row) => row.action === 'suppression.put')?.parameters).toEqual({ reason: 'asked', until: null })
    // The contact's address is not copied into the trail.
    expect(JSON.stringify(rows.find((row) => row.action === 'contact.put'))).not.toContain(address)
  })

  it('a replay, one and in bulk, is recorded with the number of dead letters it replayed', async () => {
    const code = `NTF_TEST_${guid().slice(0, 6).toUpperCase()}`
    const first = await deadLetter()
    expect((await call('POST', `/v1/dead-letters/${first}/replay`, ADMIN_TOKEN, {})).status).toBe(200)
    const [one] = await auditRows(`action=dead-letter.replay&target=${first}`)
    expect(one).toMatchObject({ affected: 1, target: first })
    await deadLetter(code)
    await deadLetter(code)
    const byCode = async () =>
      (await auditRows('action=dead-letters.replay&limit=500')).filter((row) => row.parameters.code === code)
    // A dry run changes nothing, so it is not in the trail.
    expect((await call('POST', '/v1/dead-letters/replay', ADMIN_TOKEN, { code, dryRun: true })).status).toBe(200)
    expect(await byCode()).toEqual([])
    const bulk = await call('POST', '/v1/dead-letters/replay', ADMIN_TOKEN, { code })
    expect(bulk.body.replayed).toHaveLength(2)
    expect((await byCode()).map((row) => [row.affected, row.target, row.parameters.max])).toEqual([[2, null, 100]])
  })

  it('audit rows cannot be updated or deleted, not even by SQL', async () => {
    await call('PUT', `/v1/reviewers/${guid()}`, ADMIN_TOKEN)
    await expect(env.DB.prepare("UPDATE audit_log SET actor = 'someone else'").run()).rejects.toThrow(/never changed/)
    await expect(env.DB.prepare('DELETE FROM audit_log').run()).rejects.toThrow(/never deleted/)
  })

  it('pages newest first without repeating or skipping, and refuses a cursor it did not give', async () => {
    const added = Array.from({ length: 7 }, () => guid())
    for (const user of added) await call('PUT', `/v1/reviewers/${user}`, ADMIN_TOKEN)
    const seen: number[] = []
    const targets: string[] = []
    let cursor: string | null = null
    do {
      const query: string = `action=reviewer.add&limit=3${cursor ? `&cursor=${cursor}` : ''}`
      const { body } = await call('GET', `/v1/audit?${query}`, ADMIN_TOKEN)
      seen.push(...body.items.map((row) => Number(row.id)))
      targets.push(...body.items.map((row) => row.target ?? ''))
      cursor = body.nextCursor
    } while (cursor)
    expect(seen).toEqual([...seen].sort((a, b) => b - a))
    expect(new Set(seen).size).toBe(seen.length)
    expect(targets.filter((target) => added.includes(target))).toEqual([...added].reverse())
    const refused = await call('GET', '/v1/audit?cursor=not-a-cursor', ADMIN_TOKEN)
    expect(refused.status).toBe(400)
    expect(refused.body.error.issues[0]?.field).toBe('cursor')
  })
})
