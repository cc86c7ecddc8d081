import { z } from '@hono/zod-openapi'
import { bodyLimit } from 'hono/body-limit'
import { HTTPException } from 'hono/http-exception'
import { secureHeaders } from 'hono/secure-headers'
import { IngestRequestSchema } from '../contracts/index.ts'
import { type ApiCode, ApiError, type FieldIssue } from '../errors.ts'
import { asyncApiDocument } from '../events/asyncapi.ts'
import { ingest } from '../ingest/route.ts'
import { loggerFor } from '../log.ts'
import { maskUnsubscribeTokens } from '../preferences/mask.ts'
import { type Operator, requireOperator } from './auth.ts'
import { redactPaths } from './loggable-path.ts'
import { createRouter, errors, json } from './openapi.ts'
import { audit } from './routes/audit.ts'
import { contacts } from './routes/contacts.ts'
import { deadLetters } from './routes/dead-letters.ts'
import { erasures } from './routes/erasures.ts'
import { events } from './routes/events.ts'
import { health } from './routes/health.ts'
import { metrics } from './routes/metrics.ts'
import { notifications } from './routes/notifications.ts'
import { preferences } from './routes/preferences.ts'
import { reviewers } from './routes/reviewers.ts'
import { suppressions } from './routes/suppressions.ts'
import { templates } from './routes/templates.ts'
import { unsubscribeLinks } from './routes/unsubscribe.ts'
import { resendWebhookDoc, webhooks } from './routes/webhooks.ts'

/** Largest body of an operator request (a template is the largest). */
const OPERATOR_MAX_BYTES = 1024 * 1024

/** The error body of every non-2xx answer. */
export type ErrorBody = { error: { code: ApiCode; message: string; issues?: FieldIssue[] } }

/** The Worker's HTTP API: health, ingest, the operator routes, metrics and their OpenAPI document. */
export const app = createRouter()

app.use(secureHeaders())

app.get('/healthz', (c) => c.json({ status: 'ok' }))

// The events this Worker consumes, from the registry (docs/asyncapi.yaml is the same document).
app.get('/asyncapi.json', (c) => c.json(asyncApiDocument()))

// Scopes: the ingest token may only ingest; the viewer token may read; the admin token may do
// everything else (current and previous values of each, for rotation). Provider
// webhooks carry their own proof (a signature) and check it themselves.
const admin = requireOperator()
const ownAuthentication = (path: string) => path === '/v1/ingest' || path.startsWith('/v1/webhooks/')
app.use('/v1/*', async (c, next) => (ownAuthentication(c.req.path) ? next() : admin(c, next)))
// Operator requests are small; the ingest route has its own 256 KB limit.
const operatorBodyLimit = bodyLimit({
  maxSize: OPERATOR_MAX_BYTES,
  onError: () => {
    throw new ApiError('PAYLOAD_TOO_LARGE', `request body exceeds ${OPERATOR_MAX_BYTES} bytes`)
  },
})
app.use('/v1/*', async (c, next) => (ownAuthentication(c.req.path) ? next() : operatorBodyLimit(c, next)))
app.use('/metrics', admin)
// Nothing a viewer reads may be a capability to write: an unsubscribe token in any JSON answer to a
// viewer — a dead letter's body, an error that quotes a header — is masked on its way out,
// whichever route made it. The notifications route masks its own fields and raw MIME itself (a
// token in a base64 part is not in the JSON text); this catches everything else.
app.use('/v1/*', async (c, next) => {
  await next()
  const operator = c.get('operator') as Operator | undefined
  if (operator?.role !== 'viewer' || !(c.res.headers.get('content-type') ?? '').includes('json')) return
  c.res = new Response(maskUnsubscribeTokens(await c.res.text()), c.res)
})

app.route('/v1/ingest', ingest)
app.route('/v1/dead-letters', deadLetters)
app.route('/v1/events', events)
app.route('/v1/notifications', notifications)
app.route('/v1/templates', templates)
app.route('/v1/contacts', contacts)
app.route('/v1/reviewers', reviewers)
app.route('/v1/suppressions', suppressions)
app.route('/v1/preferences', preferences)
app.route('/v1/erasures', erasures)
app.route('/v1/webhooks', webhooks)
app.route('/u', unsubscribeLinks)
app.route('/v1/audit', audit)
app.route('/v1/health', health)
app.route('/metrics', metrics)

// The ingest route validates its body itself (size before parse); it is documented here.
app.openAPIRegistry.registerComponent('securitySchemes', 'adminToken', {
  type: 'http',
  scheme: 'bearer',
  description: 'ADMIN_TOKEN for everything; VIEWER_TOKEN for reads (GET, and POST /v1/templates/preview)',
})
app.openAPIRegistry.registerComponent('securitySchemes', 'ingestToken', { type: 'http', scheme: 'bearer' })
app.openAPIRegistry.registerPath({
  method: 'post',
  path: '/v1/ingest',
  summary: 'Accept events from the bridge onto notify-events',
  description: '1–100 events, at most 256 KB; 202 only after every event is on the queue.',
  security: [{ ingestToken: [] }],
  request: { body: { content: { 'application/json': { schema: IngestRequestSchema } } } },
  responses: {
    202: json(z.object({ accepted: z.number().int() }), 'Accepted: every event is on the queue'),
    ...errors(400, 401, 403, 413, 500, 503),
  },
})
app.openAPIRegistry.registerPath(resendWebhookDoc)
app.openAPIRegistry.registerPath({
  method: 'get',
  path: '/healthz',
  summary: 'Liveness',
  responses: { 200: json(z.object({ status: z.literal('ok') }), 'Alive') },
})

app.openAPIRegistry.registerPath({
  method: 'get',
  path: '/asyncapi.json',
  summary: 'The AsyncAPI 3 document of the events this Worker consumes, made from its event registry',
  responses: { 200: json(z.object({ asyncapi: z.string() }).passthrough(), 'The AsyncAPI document') },
})
app.openAPIRegistry.registerPath({
  method: 'get',
  path: '/openapi.json',
  summary: 'This document (OpenAPI 3.1)',
  responses: { 200: json(z.object({ openapi: z.string() }).passthrough(), 'The OpenAPI document') },
})

app.doc31('/openapi.json', {
  openapi: '3.1.0',
  info: {
    title: 'notify-edge',
    version: '0.1.0',
    description:
      'Ingest for the bridge; provider webhooks; one-click unsubscribe links; dead letters, event traces, notifications, templates, contacts, preferences, suppressions, erasures and metrics for operators.',
  },
})

app.notFound((c) =>
  c.json<ErrorBody>({ error: { code: 'NOT_FOUND', message: `no route ${c.req.method} ${c.req.path}` } }, 404),
)

/**
 * What Hono's own middleware throws (the validators' 400 for malformed JSON,
 * the media-type gate's 415) as our coded errors, naming the part of the
 * request at fault.
 */
function fromHttpException(error: HTTPException): ApiError {
  if (error.status === 415) {
    return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json', [
      { field: 'content-type', message: 'expected application/json' },
    ])
  }
  if (error.status === 413) return new ApiError('PAYLOAD_TOO_LARGE', error.message)
  if (error.status === 404) return new ApiError('NOT_FOUND', error.message)
  if (error.status >= 400 && error.status < 500) {
    return new ApiError('INVALID_JSON', error.message || 'the request body is not JSON', [
      { field: 'body', message: error.message || 'not JSON' },
    ])
  }
  return new ApiError('INTERNAL', 'unexpected error; see the Worker log')
}

// The one place where errors become answers; a 5xx never shows internals.
app.onError((raw, c) => {
  const error = raw instanceof HTTPException ? fromHttpException(raw) : raw
  if (error instanceof ApiError) {
    const body: ErrorBody = { error: { code: error.code, message: error.message } }
    if (error.issues) body.error.issues = error.issues
    if (error.status >= 500) loggerFor(c.env).error('api.error', { code: error.code, error })
    return c.json(body, error.status as 400)
  }
  loggerFor(c.env).error('api.unexpected', { path: redactPaths(c.req.path), error })
  return c.json<ErrorBody>({ error: { code: 'INTERNAL', message: 'unexpected error; see the Worker log' } }, 500)
})
