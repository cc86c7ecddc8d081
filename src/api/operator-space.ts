import type { OpenAPIHono } from '@hono/zod-openapi'
import { createMiddleware } from 'hono/factory'
import type { Operator } from '../audit/operator.ts'
import { maskUnsubscribeTokens } from '../preferences/mask.ts'
import { isRead, requireOperator } from './auth.ts'
import { type AppEnv, createRouter } from './openapi.ts'

/**
 * Nothing a viewer reads may be a capability to write: an unsubscribe token in
 * any JSON answer to a viewer — a dead letter's body, an error that quotes a
 * header — is masked on its way out, whichever route made it. The
 * notifications route masks its own fields and raw MIME itself (a token in a
 * base64 part is not in the JSON text); this catches everything else.
 */
const maskForViewers = createMiddleware<AppEnv>(async (c, next) => {
  await next()
  const operator = c.get('operator') as Operator | undefined
  if (operator?.role !== 'viewer' || !(c.res.headers.get('content-type') ?? '').includes('json')) return
  c.res = new Response(maskUnsubscribeTokens(await c.res.text()), c.res)
})

const asViewer = requireOperator('viewer')
const asAdmin = requireOperator('admin')

/**
 * Under an operator prefix, a path or method no route answers is told apart
 * from a route only with an operator's token: without one it is 401 like any
 * route there; with one, the API's 404. It asks the role the request would
 * need (a read a viewer, anything else an admin), so a viewer's change is
 * refused whether or not its route exists.
 */
const noSuchRoute = createMiddleware<AppEnv>((c, next) => (isRead(c.req.method) ? asViewer : asAdmin)(c, next))

/**
 * The routers of an operator prefix (`/v1`, `/metrics`), by the path each is
 * mounted at — each of their routes declares its role (`operatorRoute`) —
 * then the answer to every other path under it. Mounted after the public and
 * ingest routes that share `/v1`: those answer first.
 */
export function operatorSpace(routers: Record<string, OpenAPIHono<AppEnv>>): OpenAPIHono<AppEnv> {
  const space = createRouter()
  space.use(maskForViewers)
  for (const [path, router] of Object.entries(routers)) space.route(path, router)
  space.all('*', noSuchRoute, (c) => c.notFound())
  return space
}
