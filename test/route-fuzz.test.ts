/**
 * Every documented route fuzzed from its own schemas: path and query
 * parameters and bodies generated from /openapi.json, each value now and then
 * replaced by a hostile one, plus repeated parameters, wrong content types,
 * raw garbage bodies and wrong methods — with the admin token, the ingest
 * token, an end user's inbox token and none. Never a 500; every 4xx carries a code, a 400 names the
 * field; a refused request leaves D1 as it was; every answer matches the
 * document (fetchWorker checks it). The ingest route has its own fuzzing
 * (fuzz.test.ts): an accepted ingest writes D1 later, through its queue.
 */
import { env, exports } from 'cloudflare:workers'
import fc from 'fast-check'
import { sign } from 'hono/jwt'
import { describe, expect, it } from 'vitest'
import { INBOX_AUDIENCE } from '../src/inbox/token.ts'
import { ADMIN_TOKEN, INGEST_TOKEN } from './helpers.ts'
import { arbitraryOf, HOSTILE_STRINGS, hostileValue, type JsonSchema } from './schema-arbitrary.ts'
import { fetchWorker } from './worker-fetch.ts'

const SEED = 20261130
const REQUESTS = 10_000

type Parameter = { name: string; in: 'path' | 'query'; required?: boolean; schema: JsonSchema }
type Operation = {
  parameters?: Parameter[]
  requestBody?: { content: Record<string, { schema: JsonSchema }> }
}
type Document = {
  paths: Record<string, Record<string, Operation>>
  components?: { schemas?: Record<string, JsonSchema> }
}

type Fuzzed = { method: string; path: string; headers: Record<string, string>; body?: string; label: string }

/** A value as it travels in a URL: strings as they are, anything else as JSON. */
function asText(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '')
}

/** Percent-encoded; a string that is not well-formed UTF-16 goes as bytes that are not UTF-8 either. */
function encode(text: string): string {
  try {
    return encodeURIComponent(text)
  } catch {
    return `%ED%A0%80${encodeURIComponent(text.toWellFormed())}`
  }
}

function requestsOf(doc: Document, inboxToken: string): fc.Arbitrary<Fuzzed> {
  const operatorToken = fc.constantFrom<(string | null)[]>(ADMIN_TOKEN, ADMIN_TOKEN, ADMIN_TOKEN, null, INGEST_TOKEN)
  // An end user's own routes get their token too, so their validation is fuzzed, not only their refusal. (On
  // an operator route it would be an unknown token, which is counted: a write the refusals here must not make.)
  const recipientToken = fc.constantFrom<(string | null)[]>(inboxToken, inboxToken, inboxToken, null, ADMIN_TOKEN)
  const operations = Object.entries(doc.paths).flatMap(([template, methods]) =>
    Object.entries(methods)
      .filter(() => template !== '/v1/ingest')
      .map(([method, operation]) => ({ template, method: method.toUpperCase(), operation })),
  )
  return fc.constantFrom(...operations).chain(({ template, method, operation }) => {
    const parameters = operation.parameters ?? []
    const pathValues = fc.record(
      Object.fromEntries(
        parameters.filter((p) => p.in === 'path').map((p) => [p.name, arbitraryOf(p.schema, doc).map(asText)]),
      ),
    )
    const query = fc.array(
      fc.oneof(
        ...parameters
          .filter((p) => p.in === 'query')
          .map((p) => fc.tuple(fc.constant(p.name), arbitraryOf(p.schema, doc).map(asText))),
        fc.tuple(fc.constantFrom('limit', 'cursor', 'x', '__proto__'), fc.constantFrom(...HOSTILE_STRINGS)),
      ),
      { maxLength: 4 },
    )
    const schema = operation.requestBody?.content['application/json']?.schema
    const json = (text: string) => ({ type: 'application/json', text })
    const body = fc.oneof(
      {
        arbitrary: schema
          ? arbitraryOf(schema, doc).map((value) => json(JSON.stringify(value)))
          : fc.constant(undefined),
        weight: 6,
      },
      { arbitrary: hostileValue.map((value) => json(JSON.stringify(value) ?? 'null')), weight: 1 },
      { arbitrary: fc.constantFrom('{', '{"a":', 'not json', '\u0000', '[1,2').map(json), weight: 1 },
      {
        arbitrary: fc
          .constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '')
          .map((type) => ({ type, text: '{"subject":"s"}' })),
        weight: 1,
      },
      { arbitrary: fc.constant(undefined), weight: 1 },
    )
    const verb = fc.oneof(
      { arbitrary: fc.constant(method), weight: 9 },
      fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'),
    )
    const token = template.startsWith('/v1/inbox') ? recipientToken : operatorToken
    return fc.record({ pathValues, query, body, token, verb }).map(({ pathValues, query, body, token, verb }) => {
      const path = template.replace(/\{([^}]+)\}/g, (_, name: string) => encode(pathValues[name] ?? 'x'))
      const search = query.map(([name, value]) => `${encode(name)}=${encode(value)}`).join('&')
      const headers: Record<string, string> = {}
      if (token) headers.authorization = `Bearer ${token}`
      const withBody = body && verb !== 'GET' && verb !== 'HEAD'
      if (withBody && body.type) headers['content-type'] = body.type
      return {
        method: verb,
        path: search ? `${path}?${search}` : path,
        headers,
        body: withBody ? body.text : undefined,
        label: `${method} ${template}`,
      }
    })
  })
}

/**
 * Counts every write to the Worker's tables from here on: a trigger per table
 * and statement kind bumps one counter, so a refused request that wrote
 * anything shows up, whatever table it touched.
 */
async function countWrites(): Promise<() => Promise<number>> {
  await env.DB.prepare('CREATE TABLE IF NOT EXISTS fuzz_writes (n INTEGER NOT NULL)').run()
  await env.DB.prepare('INSERT INTO fuzz_writes (n) VALUES (0)').run()
  const { results } = await env.DB.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> 'fuzz_writes'",
  ).all<{ name: string }>()
  const triggers = results.flatMap(({ name }) =>
    ['INSERT', 'UPDATE', 'DELETE'].map((kind) =>
      env.DB.prepare(
        `CREATE TRIGGER fuzz_${name}_${kind.toLowerCase()} AFTER ${kind} ON "${name}" BEGIN UPDATE fuzz_writes SET n = n + 1; END`,
      ),
    ),
  )
  await env.DB.batch(triggers)
  return async () => (await env.DB.prepare('SELECT n FROM fuzz_writes').first<{ n: number }>())?.n ?? 0
}

describe('every operator route, fuzzed from its schema', () => {
  it(`${REQUESTS.toLocaleString('en')} requests: never a 500, every 4xx coded (400s name the field), D1 untouched by refusals`, async () => {
    const doc = (await (await exports.default.fetch('http://worker/openapi.json')).json()) as Document
    const writesSoFar = await countWrites()
    const inboxToken = await sign(
      { sub: 'fuzzed-user', aud: INBOX_AUDIENCE, exp: Math.floor(Date.now() / 1000) + 3600 },
      env.INBOX_TOKEN_SECRET,
      'HS256',
    )
    const samples = fc.sample(requestsOf(doc, inboxToken), { numRuns: REQUESTS, seed: SEED })
    const statuses = new Map<string, number>()
    const routes = new Set<string>()
    for (const request of samples) {
      const before = await writesSoFar()
      const response = await fetchWorker(request.path, {
        method: request.method,
        headers: request.headers,
        body: request.body,
      })
      const where = `${request.method} ${request.path.slice(0, 200)} (${request.label}) ${JSON.stringify(request.headers['content-type'] ?? null)} ${request.body?.slice(0, 200) ?? '(no body)'}`
      statuses.set(String(response.status), (statuses.get(String(response.status)) ?? 0) + 1)
      routes.add(request.label)
      expect(response.status, where).toBeLessThan(500)
      if (response.status >= 400) {
        const body = (await response.json()) as { error?: { code?: string; issues?: { field?: string }[] } }
        expect(body.error?.code, where).toMatch(/^[A-Z_]+$/)
        if (response.status === 400) {
          expect(body.error?.issues?.length, where).toBeGreaterThan(0)
          for (const issue of body.error?.issues ?? []) expect(issue.field, where).toBeTruthy()
        }
        expect(await writesSoFar(), `${where} changed D1`).toBe(before)
      } else {
        await response.arrayBuffer()
      }
    }
    // The write counter saw the accepted requests write (so its silence on refusals means something).
    expect(await writesSoFar()).toBeGreaterThan(0)
    // The run reached every route and both sides of the gate.
    expect(routes.size).toBe(
      Object.values(doc.paths).reduce((sum, methods) => sum + Object.keys(methods).length, 0) - 1,
    )
    for (const status of ['200', '400', '401', '403', '404']) expect(statuses.get(status), status).toBeGreaterThan(0)
    console.log(`route fuzz: ${JSON.stringify(Object.fromEntries(statuses))}`)
    // Ten thousand requests through the whole Worker, each checked against the document and the
    // write counter: about 80 s on this machine while other test files run beside it.
  }, 300_000)
})
