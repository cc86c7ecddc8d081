/**
 * `/console`: the operators' web pages, rendered on the server (Hono JSX), no
 * build step, every action a plain form that works with JavaScript off. Who
 * is signed in comes from a signed session cookie (opened with an operator
 * token, or from a Cloudflare Access identity); every page reads and changes
 * through the operator API in-process, as that operator.
 */
import { Hono } from 'hono'
import { deleteCookie, getCookie, setCookie } from 'hono/cookie'
import { csrf } from 'hono/csrf'
import { HTTPException } from 'hono/http-exception'
import { NONCE, secureHeaders } from 'hono/secure-headers'
import { type Operator, scopeOfToken } from '../api/auth.ts'
import { type Config, configOf } from '../config.ts'
import { secretsEqual } from '../crypto.ts'
import { loggerFor } from '../log.ts'
import { maskUnsubscribeTokens, maskUnsubscribeTokensInMime } from '../preferences/mask.ts'
import { accessIdentity } from './access.ts'
import { consoleApi } from './api.ts'
import type { ConsoleContext, ConsoleEnv } from './context.ts'
import { healthOf } from './health.tsx'
import { Layout, type PageContext } from './layout.tsx'
import { deadLetterPages } from './pages/dead-letters.tsx'
import { erasurePages } from './pages/erasures.tsx'
import { eventPages } from './pages/events.tsx'
import { lookupPages } from './pages/lookups.tsx'
import { overviewPage } from './pages/overview.tsx'
import { templatePages } from './pages/templates.tsx'
import { newCsrfToken, SESSION_COOKIE, type Session, signSession, tokenFingerprint, verifySession } from './session.ts'

const sessionKeys = (config: Config) =>
  [config.CONSOLE_SESSION_KEY, config.CONSOLE_SESSION_KEY_PREVIOUS].filter((key): key is string => key !== undefined)

/** Whether the token a session was opened with is still one of its role's configured tokens. */
async function tokenStillValid(session: Session, config: Config): Promise<boolean> {
  const tokens =
    session.role === 'admin'
      ? [config.ADMIN_TOKEN, config.ADMIN_TOKEN_PREVIOUS]
      : [config.VIEWER_TOKEN, config.VIEWER_TOKEN_PREVIOUS]
  for (const key of sessionKeys(config)) {
    for (const token of tokens) {
      if (token && (await secretsEqual(await tokenFingerprint(token, key), session.via))) return true
    }
  }
  return false
}

async function openSession(c: ConsoleContext, config: Config, fields: Omit<Session, 'exp' | 'csrf'>): Promise<Session> {
  const key = config.CONSOLE_SESSION_KEY as string
  const session: Session = {
    ...fields,
    csrf: newCsrfToken(),
    exp: Math.floor(Date.now() / 1000) + config.CONSOLE_SESSION_HOURS * 3600,
  }
  setCookie(c, SESSION_COOKIE, await signSession(session, key), {
    httpOnly: true,
    secure: true,
    sameSite: 'Strict',
    path: '/',
    maxAge: config.CONSOLE_SESSION_HOURS * 3600,
  })
  return session
}

/** The signed-in session: the cookie's, checked against its token or Access; else one from Access; else none. */
async function sessionOf(c: ConsoleContext, config: Config) {
  const access = await accessIdentity(c.req.header('cf-access-jwt-assertion'), config)
  const session = await verifySession(getCookie(c, SESSION_COOKIE), sessionKeys(config), new Date())
  if (session?.via === 'access') {
    if (access && access.email === session.name && access.role === session.role) return session
  } else if (session && (await tokenStillValid(session, config))) {
    return session
  }
  if (access) return openSession(c, config, { name: access.email, role: access.role, via: 'access' })
  return undefined
}

/** A page that says what went wrong, with the status it is answered with. */
function problemPage(page: PageContext, title: string, message: string) {
  return (
    <Layout page={page} title={title}>
      <p class="error" role="alert">
        {message}
      </p>
      <p>
        <a href="/console">Back to the overview</a>
      </p>
    </Layout>
  )
}

export const consoleApp = new Hono<ConsoleEnv>()

// A strict policy: nothing loads but this origin's own pages and frames; the one style block and
// any script carry the response's nonce.
consoleApp.use(
  '*',
  secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'none'"],
      styleSrc: [NONCE],
      scriptSrc: [NONCE],
      // The template editor's live preview posts its form to the console.
      connectSrc: ["'self'"],
      imgSrc: ["'self'"],
      formAction: ["'self'"],
      frameSrc: ["'self'"],
      frameAncestors: ["'none'"],
      baseUri: ["'none'"],
    },
    referrerPolicy: 'same-origin',
    // A page with a policy of its own (the sandboxed email frame) keeps it.
    overwrite: false,
  }),
)
// A cross-site form post is refused by its Origin, before any handler runs.
consoleApp.use('*', csrf())
consoleApp.use('*', async (c, next) => {
  c.header('cache-control', 'no-store')
  c.set('page', { nonce: c.get('secureHeadersNonce') ?? '' })
  await next()
})

consoleApp.onError((error, c) => {
  // A refusal by a middleware (a cross-site form post) keeps its status.
  if (error instanceof HTTPException && error.status < 500) {
    const page = problemPage(c.get('page') ?? { nonce: '' }, 'Refused', 'This request was not sent by the console.')
    return c.html(page, error.status)
  }
  loggerFor(c.env).error('console.unexpected', { error })
  return c.html(problemPage(c.get('page') ?? { nonce: '' }, 'Something went wrong', 'See the Worker log.'), 500)
})

consoleApp.get('/sign-in', (c) => {
  const config = configOf(c.env)
  const closed = sessionKeys(config).length === 0
  return c.html(
    <Layout page={c.get('page')} title="Sign in">
      {closed ? (
        <p class="note">The console is closed: set CONSOLE_SESSION_KEY to open it.</p>
      ) : (
        <form method="post" action="/console/sign-in">
          {c.req.query('failed') ? (
            <p class="error" role="alert">
              That is not an operator token.
            </p>
          ) : null}
          <label>
            Token (admin or viewer)
            <input type="password" name="token" autocomplete="current-password" required />
          </label>
          <div class="actions">
            <button type="submit">Sign in</button>
          </div>
          {config.ACCESS_TEAM_DOMAIN ? <p>Behind Cloudflare Access you are signed in by Access itself.</p> : null}
        </form>
      )}
    </Layout>,
    closed ? 503 : 200,
  )
})

consoleApp.post('/sign-in', async (c) => {
  const config = configOf(c.env)
  if (sessionKeys(config).length === 0) return c.redirect('/console/sign-in', 303)
  const form = await c.req.parseBody()
  const token = typeof form.token === 'string' ? form.token : ''
  const scope = token ? await scopeOfToken(token, config) : undefined
  if (scope !== 'admin' && scope !== 'viewer') return c.redirect('/console/sign-in?failed=1', 303)
  const via = await tokenFingerprint(token, config.CONSOLE_SESSION_KEY as string)
  await openSession(c, config, { name: `${scope} token`, role: scope, via })
  return c.redirect('/console', 303)
})

// Everything below needs a session; a change also needs its form's CSRF token.
consoleApp.use('*', async (c, next) => {
  const config = configOf(c.env)
  // Without a session key there are no sessions, from the form or from Access: the sign-in page says so.
  const session = sessionKeys(config).length > 0 ? await sessionOf(c, config) : undefined
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
  await next()
})

// A viewer's pages and downloads carry no unsubscribe token, whatever they show: the API already
// masks what it answers a viewer, and this covers what a page reads from D1 itself (the overview's
// latest failures).
consoleApp.use('*', async (c, next) => {
  await next()
  if (c.get('operator').role !== 'viewer') return
  const type = c.res.headers.get('content-type') ?? ''
  if (!/text\/html|message\/rfc822/.test(type)) return
  const body = await c.res.text()
  const masked = type.includes('rfc822') ? maskUnsubscribeTokensInMime(body) : maskUnsubscribeTokens(body)
  c.res = new Response(masked, c.res)
})

consoleApp.post('/sign-out', (c) => {
  deleteCookie(c, SESSION_COOKIE, { path: '/', secure: true })
  return c.redirect('/console/sign-in', 303)
})

// A viewer sees every page and none of the buttons; a change posted anyway is refused here too.
consoleApp.use('*', async (c, next) => {
  // Posts that only read: revealing a recipient (audited) and previewing a template. A viewer may.
  const read = /^\/console\/(notifications\/[^/]+\/reveal|templates\/[^/]+\/[^/]+\/[^/]+\/preview)$/.test(c.req.path)
  if (c.req.method === 'POST' && !read && c.get('operator').role !== 'admin') {
    return c.html(problemPage(c.get('page'), 'Not allowed', 'A viewer may look at everything and change nothing.'), 403)
  }
  await next()
})

consoleApp.get('/', overviewPage)
consoleApp.route('/dead-letters', deadLetterPages)
consoleApp.route('/', eventPages)
consoleApp.route('/templates', templatePages)
consoleApp.route('/erasures', erasurePages)
consoleApp.route('/', lookupPages)
// Last: any other path under /console (a route's notFound does not carry over when mounted).
consoleApp.all('*', (c) => c.html(problemPage(c.get('page'), 'Not found', 'No such page.'), 404))
