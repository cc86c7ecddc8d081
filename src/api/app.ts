import { Hono } from 'hono'
import { secureHeaders } from 'hono/secure-headers'
import { type ApiCode, ApiError, type FieldIssue } from '../errors.ts'
import { ingest } from '../ingest/route.ts'
import { loggerFor } from '../log.ts'

/** The error body of every non-2xx answer. */
export type ErrorBody = { error: { code: ApiCode; message: string; issues?: FieldIssue[] } }

/** The Worker's HTTP API: health, ingest and (later) the operator routes. */
export const app = new Hono<{ Bindings: Env }>()

app.use(secureHeaders())

app.get('/healthz', (c) => c.json({ status: 'ok' }))

app.route('/v1/ingest', ingest)

app.notFound((c) =>
  c.json<ErrorBody>({ error: { code: 'NOT_FOUND', message: `no route ${c.req.method} ${c.req.path}` } }, 404),
)

// The one place where errors become answers; a 5xx never shows internals.
app.onError((error, c) => {
  if (error instanceof ApiError) {
    const body: ErrorBody = { error: { code: error.code, message: error.message } }
    if (error.issues) body.error.issues = error.issues
    if (error.status >= 500) loggerFor(c.env).error('api.error', { code: error.code, error })
    return c.json(body, error.status as 400)
  }
  loggerFor(c.env).error('api.unexpected', { path: c.req.path, error })
  return c.json<ErrorBody>({ error: { code: 'INTERNAL', message: 'unexpected error; see the Worker log' } }, 500)
})
