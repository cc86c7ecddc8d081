import { cors } from 'hono/cors'
import { createMiddleware } from 'hono/factory'
import { configOf } from '../config.ts'
import type { AppEnv } from './openapi.ts'

/**
 * CORS for an end user's inbox routes: the host application's pages call them
 * from the browser, from another origin than the Worker's. Only the origins
 * INBOX_ALLOWED_ORIGINS lists are answered `Access-Control-Allow-Origin`, with
 * the two request headers the routes read; a preflight (`OPTIONS`) is
 * answered here, before any token is asked for. Without the list, no origin
 * is allowed and browsers keep to the Worker's own. The socket needs none of
 * it: a WebSocket is not subject to CORS, and its token is its proof.
 */
export const inboxCors = createMiddleware<AppEnv>((c, next) => {
  // An OPTIONS that is no preflight is no request of a browser's: it goes on to be answered 404 like any
  // other method no route takes.
  if (c.req.method === 'OPTIONS' && !c.req.header('access-control-request-method')) return next()
  const allowed = configOf(c.env).INBOX_ALLOWED_ORIGINS ?? []
  return cors({
    origin: (origin) => (allowed.includes(origin) ? origin : null),
    allowMethods: ['GET', 'POST'],
    allowHeaders: ['authorization', 'content-type'],
    maxAge: 600,
  })(c, next)
})
