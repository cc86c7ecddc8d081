/**
 * Who may open a console page, declared with the page: its first handler is
 * `needsNobody` (the sign-in form), `needsViewer` (every page, and the posts
 * that only read: a reveal, a template's preview) or `needsAdmin` (every post
 * that changes something). No list of paths decides it; test/route-roles.test.ts
 * calls every page of the console with each role and fails on a page that
 * declares none.
 */
import { createMiddleware } from 'hono/factory'
import type { Role } from '../api/roles.ts'
import type { Operator } from '../audit/operator.ts'
import { secretsEqual } from '../crypto.ts'
import { maskUnsubscribeTokens, maskUnsubscribeTokensInMime } from '../preferences/mask.ts'
import { consoleApi } from './api.ts'
import type { ConsoleEnv } from './context.ts'
import { healthOf } from './health.tsx'
import { problemPage } from './problem.tsx'
import { signedInSession } from './signed-in.ts'

/** Who may open a console page: anyone, a signed-in operator, or a signed-in admin. */
export type PageRole = Exclude<Role, 'ingest'>

const declared = new WeakMap<object, PageRole>()

/** The role a page's handler declares, if it is one of the declarations below (what the route test reads). */
export function declaredRole(handler: unknown): PageRole | undefined {
  return typeof handler === 'function' ? declared.get(handler) : undefined
}

/**
 * A signed-in operator of `role`. Without a session: the sign-in form. A post
 * must carry its form's CSRF token (403). A viewer may not post a change
 * (403). A viewer's pages and downloads carry no unsubscribe token, whatever
 * they show: the API already masks what it answers a viewer, and this covers
 * what a page reads from D1 itself.
 */
function signedIn(role: 'viewer' | 'admin') {
  return createMiddleware<ConsoleEnv>(async (c, next) => {
    const session = await signedInSession(c)
    if (!session) return c.redirect('/console/sign-in', 303)
    if (c.req.method === 'POST') {
      const form = await c.req.parseBody()
      const token = typeof form._csrf === 'string' ? form._csrf : ''
      if (!(await secretsEqual(token, session.csrf))) {
        return c.html(problemPage(c.get('page'), 'Refused', 'This form is stale or was not sent by the console.'), 403)
      }
    }
    const operator: Operator = { name: session.name, role: session.role, via: 'console' }
    c.set('session', session)
    c.set('operator', operator)
    c.set('page', { ...c.get('page'), operator, csrf: session.csrf, health: await healthOf(c.env) })
    c.set('api', consoleApi(c, operator))
    if (role === 'admin' && operator.role !== 'admin') {
      return c.html(
        problemPage(c.get('page'), 'Not allowed', 'A viewer may look at everything and change nothing.'),
        403,
      )
    }
    await next()
    if (operator.role !== 'viewer') return
    const type = c.res.headers.get('content-type') ?? ''
    if (!/text\/html|message\/rfc822/.test(type)) return
    const body = await c.res.text()
    const masked = type.includes('rfc822') ? maskUnsubscribeTokensInMime(body) : maskUnsubscribeTokens(body)
    c.res = new Response(masked, c.res)
  })
}

function declare<T extends object>(role: PageRole, handler: T): T {
  declared.set(handler, role)
  return handler
}

/** A page anyone may open: the sign-in form. */
export const needsNobody = declare(
  'public',
  createMiddleware<ConsoleEnv>((_c, next) => next()),
)

/** A page for every signed-in operator, or a post that only reads (a reveal, a preview). */
export const needsViewer = declare('viewer', signedIn('viewer'))

/** A post that changes something: an admin's alone. */
export const needsAdmin = declare('admin', signedIn('admin'))
