import { z } from '@hono/zod-openapi'
import { HTTPException } from 'hono/http-exception'
import { secureHeaders } from 'hono/secure-headers'
import { type ApiCode, ApiError, type FieldIssue } from '../errors.ts'
import { asyncApiDocument } from '../events/asyncapi.ts'
import { loggerFor } from '../log.ts'
import { inboxCors } from './inbox-cors.ts'
import { redactPaths } from './loggable-path.ts'
import { createRouter, json } from './openapi.ts'
import { operatorSpace } from './operator-space.ts'
import { SECURITY_OF, SECURITY_SCHEMES } from './roles.ts'
import { audit } from './routes/audit.ts'
import { cancellations } from './routes/cancellations.ts'
import { channelPolicies } from './routes/channel-policies.ts'
import { contacts } from './routes/contacts.ts'
import { deadLetters } from './routes/dead-letters.ts'
import { erasures } from './routes/erasures.ts'
import { events } from './routes/events.ts'
import { health } from './routes/health.ts'
import { inbox } from './routes/inbox.ts'
import { ingest, ingestDoc } from './routes/ingest.ts'
import { metrics } from './routes/metrics.ts'
import { notifications } from './routes/notifications.ts'
import { preferences } from './routes/preferences.ts'
import { reviewers } from './routes/reviewers.ts'
import { shards } from './routes/shards.ts'
import { suppressions } from './routes/suppressions.ts'
import { templates } from './routes/templates.ts'
import { unsubscribeLinks } from './routes/unsubscribe.ts'
import { resendWebhookDoc, webhooks } from './routes/webhooks.ts'
import { holdWhileGrowing } from './shard-hold.ts'

/** The error body of every non-2xx answer. */
export type ErrorBody = { error: { code: ApiCode; message: string; issues?: FieldIssue[] } }

/** The Worker's HTTP API: health, ingest, the operator routes, metrics and their OpenAPI document. */
export const app = createRouter()

// An API answer is data: it loads nothing, runs nothing and no page may frame it. A page with a
// policy of its own (the console's, an unsubscribe link's) keeps it.
app.use(
  secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'none'"],
      frameAncestors: ["'none'"],
      baseUri: ["'none'"],
      formAction: ["'none'"],
    },
    overwrite: false,
  }),
)

// Anyone: liveness and the documents. Declared `public` in the document below.
app.get('/healthz', (c) => c.json({ status: 'ok' }))

// The events this Worker consumes, from the registry (docs/asyncapi.yaml is the same document).
app.get('/asyncapi.json', (c) => c.json(asyncApiDocument()))

// Each route requires its role where it is declared (./roles.ts): the bridge's ingest token; a
// provider webhook's signature and an unsubscribe link's token, which their routes check themselves;
// an operator's token on the operator routes — the viewer token for those that only read, the admin
// token for the rest (current and previous values of each, for rotation).
// Registered before the operator routes that share /v1: a route answers before the operator space's
// answer to what no route serves.
// While the D1 shards grow, changes wait (./shard-hold.ts).
app.use('/v1/*', holdWhileGrowing)
app.route('/v1/ingest', ingest)
app.route('/v1/webhooks', webhooks)
// An end user's own feed, with the token their host application signed (./recipient-auth.ts), called
// from the host's pages (./inbox-cors.ts).
app.use('/v1/inbox', inboxCors)
app.use('/v1/inbox/*', inboxCors)
app.route('/v1/inbox', inbox)
app.route('/u', unsubscribeLinks)

app.route(
  '/v1',
  operatorSpace({
    '/dead-letters': deadLetters,
    '/events': events,
    '/notifications': notifications,
    '/templates': templates,
    '/contacts': contacts,
    '/reviewers': reviewers,
    '/channel-policies': channelPolicies,
    '/cancellations': cancellations,
    '/suppressions': suppressions,
    '/preferences': preferences,
    '/erasures': erasures,
    '/audit': audit,
    '/health': health,
    '/shards': shards,
  }),
)
app.route('/metrics', operatorSpace({ '/': metrics }))

for (const [name, description] of Object.entries(SECURITY_SCHEMES)) {
  app.openAPIRegistry.registerComponent('securitySchemes', name, { type: 'http', scheme: 'bearer', description })
}
app.openAPIRegistry.registerPath(ingestDoc)
app.openAPIRegistry.registerPath(resendWebhookDoc)
app.openAPIRegistry.registerPath({
  method: 'get',
  path: '/healthz',
  summary: 'Liveness',
  security: SECURITY_OF.public,
  responses: { 200: json(z.object({ status: z.literal('ok') }), 'Alive') },
})

app.openAPIRegistry.registerPath({
  method: 'get',
  path: '/asyncapi.json',
  summary: 'The AsyncAPI 3 document of the events this Worker consumes, made from its event registry',
  security: SECURITY_OF.public,
  responses: { 200: json(z.object({ asyncapi: z.string() }).passthrough(), 'The AsyncAPI document') },
})
app.openAPIRegistry.registerPath({
  method: 'get',
  path: '/openapi.json',
  summary: 'This document (OpenAPI 3.1)',
  security: SECURITY_OF.public,
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
    if (error.retryAfter !== undefined) c.header('retry-after', String(error.retryAfter))
    return c.json(body, error.status as 400)
  }
  loggerFor(c.env).error('api.unexpected', { path: redactPaths(c.req.path), error })
  return c.json<ErrorBody>({ error: { code: 'INTERNAL', message: 'unexpected error; see the Worker log' } }, 500)
})
