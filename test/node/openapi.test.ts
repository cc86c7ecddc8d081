/**
 * The Worker's /openapi.json, as `wrangler dev` serves it, validated by a
 * maintained OpenAPI validator (swagger-parser: the OpenAPI 3.1 schema, and
 * every $ref resolvable). The answers themselves are checked against this
 * document in every workerd suite (test/worker-fetch.ts); the last test here
 * shows that check fails on an answer the document does not describe.
 */
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import SwaggerParser from '@apidevtools/swagger-parser'
import { assertNoLeaks } from '../../support/child-output.ts'
import { type LocalWorker, startLocalWorker } from '../../support/local-worker.ts'
import { type OpenApiDocument, openApiChecker } from '../../support/openapi-check.ts'

let worker: LocalWorker
let doc: OpenApiDocument

before(async () => {
  worker = await startLocalWorker({
    ADMIN_TOKEN: 'openapi-admin-token-012345',
    INGEST_TOKEN: 'openapi-ingest-token-01234',
  })
  doc = (await (await fetch(`${worker.url}/openapi.json`)).json()) as OpenApiDocument
})

after(async () => {
  await worker?.stop()
  assertNoLeaks()
})

test('/openapi.json is a valid OpenAPI 3.1 document (swagger-parser)', async () => {
  assert.equal(doc.openapi, '3.1.0')
  // validate() dereferences in place: give it a copy.
  await SwaggerParser.validate(structuredClone(doc) as never)
})

test('the answer check refuses an undocumented status, a wrong content type and a body off its schema', () => {
  const { check } = openApiChecker(doc)
  const notFound = JSON.stringify({ error: { code: 'NOT_FOUND', message: 'no such dead letter' } })
  assert.deepEqual(
    check({ method: 'GET', path: '/v1/dead-letters/x', status: 404, contentType: 'application/json', body: notFound }),
    [],
  )
  assert.match(
    check({
      method: 'GET',
      path: '/v1/dead-letters/x',
      status: 418,
      contentType: 'application/json',
      body: notFound,
    })[0] ?? '',
    /status 418 is not documented/,
  )
  assert.match(
    check({ method: 'GET', path: '/v1/dead-letters/x', status: 404, contentType: 'text/html', body: '<p>' })[0] ?? '',
    /content type "text\/html"/,
  )
  assert.ok(
    check({
      method: 'GET',
      path: '/v1/dead-letters/x',
      status: 404,
      contentType: 'application/json',
      body: '{"error":{}}',
    }).length > 0,
  )
  const listed = JSON.stringify({ items: [{ id: 1 }], nextCursor: null })
  assert.ok(
    check({ method: 'GET', path: '/v1/dead-letters', status: 200, contentType: 'application/json', body: listed })
      .length > 0,
  )
})
