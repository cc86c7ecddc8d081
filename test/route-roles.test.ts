/**
 * Every route's role, from where the route declares it: each operation of
 * /openapi.json says in its `security` who may call it (src/api/roles.ts), and
 * each page of the console in its first handler (src/console/page-roles.ts).
 * Every one is called with no token, the ingest token, the viewer token, the
 * admin token and an end user's inbox token, and must answer as its declared
 * role says. The routes are
 * taken from the Hono apps themselves, so a route added without a role — or
 * served without being documented — fails here, whoever forgot it.
 */
import { createExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { sign } from 'hono/jwt'
import { describe, expect, it } from 'vitest'
import { app } from '../src/api/app.ts'
import { type Role, SECURITY_OF } from '../src/api/roles.ts'
import { consoleApp } from '../src/console/app.tsx'
import { declaredRole } from '../src/console/page-roles.ts'
import { INBOX_AUDIENCE } from '../src/inbox/token.ts'
import worker from '../src/index.ts'
import { ADMIN_TOKEN, INGEST_TOKEN } from './helpers.ts'
import { fetchWorker } from './worker-fetch.ts'

const VIEWER_TOKEN = 'test-viewer-token-0123456789'
const WITH_VIEWER = { VIEWER_TOKEN }

/** An end user's inbox token, as a host application signs it (src/inbox/token.ts). */
const RECIPIENT_TOKEN = await sign(
  { sub: 'route-roles-user', aud: INBOX_AUDIENCE, exp: Math.floor(Date.now() / 1000) + 3600 },
  env.INBOX_TOKEN_SECRET,
  'HS256',
)

const CALLERS = {
  none: null,
  ingest: INGEST_TOKEN,
  viewer: VIEWER_TOKEN,
  admin: ADMIN_TOKEN,
  recipient: RECIPIENT_TOKEN,
} as const
type Caller = keyof typeof CALLERS

/**
 * A value no path parameter accepts (longer than every id, not a GUID, an
 * address or a kind), and a body no operator route accepts: what a caller with
 * the role gets is a 400 or a 404, never a change.
 */
const PARAMETER = 'x'.repeat(300)
const BODY = '[]'

/** What the console mounts at: its routes' paths are relative to it. */
const CONSOLE = '/console'

type Operation = { security?: unknown }

/** `METHOD /path/{param}` of a Hono route (`/path/:param`). */
const routeName = (method: string, path: string) => `${method} ${path.replace(/:(\w+)/g, '{$1}')}`

/** The role whose security requirement this is, or why there is none. */
function roleOfSecurity(security: unknown): Role | 'no role declared' {
  const roles = Object.keys(SECURITY_OF) as Role[]
  return roles.find((role) => JSON.stringify(SECURITY_OF[role]) === JSON.stringify(security)) ?? 'no role declared'
}

/**
 * The role that these answers show: `public` when every caller got the same
 * answer; otherwise who was let through (neither 401 nor 403), or the four
 * answers when they fit no role.
 */
function roleShown(answers: Record<Caller, string>): string {
  const { none, ingest, viewer, admin } = answers
  const shown = Object.values(answers)
  if (shown.every((answer) => answer === none)) return 'public'
  const refused = (answer: string) => ['unauthenticated', 'forbidden', 'sign in', 'not allowed'].includes(answer)
  const through = (Object.keys(answers) as Caller[]).filter((caller) => !refused(answers[caller]))
  const key = through.join(' ')
  if (none === 'unauthenticated' && ingest === 'forbidden' && viewer === 'forbidden' && key === 'admin') return 'admin'
  if (none === 'unauthenticated' && ingest === 'forbidden' && key === 'viewer admin') return 'viewer'
  if (none === 'unauthenticated' && viewer === 'forbidden' && admin === 'forbidden' && key === 'ingest') return 'ingest'
  // An operator's token is no inbox token, and an inbox token no operator's: both are unknown to the other.
  if ([none, ingest, viewer, admin].every((answer) => answer === 'unauthenticated') && key === 'recipient') {
    return 'recipient'
  }
  if (none === 'sign in' && ingest === 'sign in' && viewer === 'not allowed' && key === 'admin') return 'admin'
  if (none === 'sign in' && ingest === 'sign in' && key === 'viewer admin') return 'viewer'
  return JSON.stringify(answers)
}

/** How the API answered one caller: refused (401 UNAUTHORIZED, 403 FORBIDDEN), or its status. */
async function apiAnswer(method: string, path: string, caller: Caller): Promise<string> {
  const token = CALLERS[caller]
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {}
  const withBody = method !== 'GET' && method !== 'HEAD'
  if (withBody) headers['content-type'] = 'application/json'
  const response = await fetchWorker(path, { method, headers, body: withBody ? BODY : undefined }, WITH_VIEWER)
  const text = await response.text()
  const code = (response.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text).error?.code : undefined
  if (response.status === 401 && code === 'UNAUTHORIZED') return 'unauthenticated'
  if (response.status === 403 && code === 'FORBIDDEN') return 'forbidden'
  return String(response.status)
}

describe('the API: every route of /openapi.json, with each token', () => {
  async function documented(): Promise<Map<string, Operation>> {
    const doc = (await (await fetchWorker('/openapi.json')).json()) as {
      paths: Record<string, Record<string, Operation>>
    }
    return new Map(
      Object.entries(doc.paths).flatMap(([path, methods]) =>
        Object.entries(methods).map(([method, operation]) => [`${method.toUpperCase()} ${path}`, operation]),
      ),
    )
  }

  it('serves exactly the routes it documents: none is left out of the walk below', async () => {
    const served = new Set(
      app.routes
        .filter((route) => route.method !== 'ALL' && route.path !== CONSOLE && !route.path.startsWith(`${CONSOLE}/`))
        .map((route) => routeName(route.method, route.path)),
    )
    expect([...served].sort()).toEqual([...(await documented()).keys()].sort())
  })

  it('answers each token as the role the route declares', async () => {
    const declared: Record<string, string> = {}
    const shown: Record<string, string> = {}
    for (const [name, operation] of await documented()) {
      const [method = '', template = ''] = name.split(' ')
      const path = template.replace(/\{[^}]+\}/g, PARAMETER)
      const answers = {} as Record<Caller, string>
      for (const caller of Object.keys(CALLERS) as Caller[]) answers[caller] = await apiAnswer(method, path, caller)
      declared[name] = roleOfSecurity(operation.security)
      shown[name] = roleShown(answers)
    }
    expect(shown).toEqual(declared)
    // Open to anyone is a decision, not a default: a new one is added here on purpose.
    expect(
      Object.keys(declared)
        .filter((name) => declared[name] === 'public')
        .sort(),
    ).toEqual([
      'GET /asyncapi.json',
      'GET /healthz',
      'GET /openapi.json',
      'GET /u/{token}',
      'POST /u/{token}',
      'POST /v1/webhooks/resend',
    ])
  })
})

describe('the console: every page, signed in with each token', () => {
  const call = async (path: string, init: RequestInit = {}) => {
    const response = await worker.fetch(
      new Request(`http://worker${path}`, { redirect: 'manual', ...init }),
      { ...env, ...WITH_VIEWER } as Env,
      createExecutionContext(),
    )
    return { status: response.status, headers: response.headers, text: await response.text() }
  }

  /** The session cookie and CSRF token a sign-in with `token` opens, or none. */
  async function signIn(token: string | null): Promise<{ cookie: string; csrf: string }> {
    if (token === null) return { cookie: '', csrf: '' }
    const answer = await call(`${CONSOLE}/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' },
      body: new URLSearchParams({ token }).toString(),
    })
    const cookie = (answer.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
    const payload = cookie.split('=')[1]?.split('.')[0]
    if (!payload) return { cookie: '', csrf: '' }
    const session = JSON.parse(atob(payload.replaceAll('-', '+').replaceAll('_', '/')))
    return { cookie, csrf: session.csrf }
  }

  /** How the console answered: the sign-in form (no session), a viewer's refusal, or its status. */
  async function pageAnswer(method: string, path: string, session: { cookie: string; csrf: string }) {
    const post = method === 'POST'
    const answer = await call(path, {
      method,
      headers: {
        cookie: session.cookie,
        ...(post ? { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker' } : {}),
      },
      // Fields that narrow any change to nothing: a bulk action to a code no dead letter has.
      body: post ? new URLSearchParams({ _csrf: session.csrf, code: 'ROUTE_ROLE_PROBE' }).toString() : undefined,
    })
    // Signing out also sends the sign-in form, but ends the session it had (its cookie cleared).
    const toSignIn = answer.status === 303 && answer.headers.get('location') === `${CONSOLE}/sign-in`
    if (toSignIn && !answer.headers.get('set-cookie')) return 'sign in'
    if (answer.status === 403 && answer.text.includes('Not allowed')) return 'not allowed'
    return String(answer.status)
  }

  it('answers each session as the role the page declares; the ingest token and an inbox token open none', async () => {
    // Fresh sessions for each route: signing out, and signing everyone out, end the sessions they ran in.
    const signInAll = async () => ({
      none: await signIn(CALLERS.none),
      ingest: await signIn(CALLERS.ingest),
      viewer: await signIn(CALLERS.viewer),
      admin: await signIn(CALLERS.admin),
      recipient: await signIn(CALLERS.recipient),
    })
    const first = await signInAll()
    expect(first.ingest.cookie).toBe('')
    expect(first.recipient.cookie).toBe('')
    expect(first.viewer.cookie).not.toBe('')
    expect(first.admin.cookie).not.toBe('')

    // Each route with its handlers: the app-wide middleware shares `ALL /*` with the last catch-all.
    const routes = new Map<string, unknown[]>()
    for (const route of consoleApp.routes) {
      const name = `${route.method} ${route.path}`
      routes.set(name, [...(routes.get(name) ?? []), route.handler])
    }
    const declared: Record<string, string> = {}
    const shown: Record<string, string> = {}
    for (const [name, handlers] of routes) {
      const role = handlers.map(declaredRole).find((found) => found !== undefined)
      const [method = '', template = ''] = name.split(' ')
      // Middleware alone (`use`) is no page; any other route must declare its role.
      if (method === 'ALL' && role === undefined) continue
      const relative = template.replace(/:\w+/g, PARAMETER).replace('*', 'no-such-page')
      const path = relative === '/' ? CONSOLE : `${CONSOLE}${relative}`
      const probe = method === 'ALL' ? 'GET' : method
      const answers = {} as Record<Caller, string>
      const sessions = await signInAll()
      for (const caller of Object.keys(CALLERS) as Caller[]) {
        answers[caller] = await pageAnswer(probe, path, sessions[caller])
      }
      declared[routeName(method, template)] = role ?? 'no role declared'
      shown[routeName(method, template)] = roleShown(answers)
    }
    expect(shown).toEqual(declared)
    expect(
      Object.keys(declared)
        .filter((name) => declared[name] === 'public')
        .sort(),
    ).toEqual(['GET /sign-in', 'POST /sign-in'])
    // The walk reached the pages, the posts that only read and the posts that change.
    expect(declared['GET /dead-letters/{id}']).toBe('viewer')
    expect(declared['POST /notifications/{id}/reveal']).toBe('viewer')
    expect(declared['POST /erasures']).toBe('admin')
  })
})
