/**
 * `/console`: the operators' web pages, rendered on the server (Hono JSX), no
 * build step, every action a plain form that works with JavaScript off. Who
 * is signed in comes from a signed session cookie (opened with an operator
 * token, or from a Cloudflare Access identity). Every change a page makes,
 * and every read of a record it shows, goes through the operator API
 * in-process, as that operator (./api.ts): its validation, roles and audit
 * trail. A few pages read D1 themselves, for what no API route answers as
 * they need it, and nothing personal: the overview's cards, charts and rates
 * and the health at the top of every page (./health.tsx), the notifications
 * list (ids, kinds, statuses), the templates' list and a template's history,
 * the digests-by-kind counts and the lookup of an event by message id.
 */
import { Hono } from 'hono'
import { deleteCookie } from 'hono/cookie'
import { csrf } from 'hono/csrf'
import { HTTPException } from 'hono/http-exception'
import { NONCE, secureHeaders } from 'hono/secure-headers'
import { ATTEMPT_PERIOD_SECONDS, clientOf, failedAttempt, refuseIfThrottled } from '../api/attempts.ts'
import { scopeOfToken } from '../api/auth.ts'
import { auditChange } from '../audit/audit-store.ts'
import { configOf } from '../config.ts'
import { ApiError } from '../errors.ts'
import { loggerFor } from '../log.ts'
import { consoleBodyLimit } from './body-limits.ts'
import type { ConsoleContext, ConsoleEnv } from './context.ts'
import { Layout } from './layout.tsx'
import { needsAdmin, needsNobody, needsViewer } from './page-roles.ts'
import { cancellationPages } from './pages/cancellations.tsx'
import { deadLetterPages } from './pages/dead-letters.tsx'
import { erasurePages } from './pages/erasures.tsx'
import { eventPages } from './pages/events.tsx'
import { lookupPages } from './pages/lookups.tsx'
import { overviewPage } from './pages/overview.tsx'
import { templatePages } from './pages/templates.tsx'
import { problemPage } from './problem.tsx'
import { SESSION_COOKIE, tokenFingerprint } from './session.ts'
import { endAllSessions, endSession } from './sessions.ts'
import { openSession, sessionKeys } from './signed-in.ts'

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
// A body is refused by its size before anything reads it (413): the sign-in form, which anyone
// may post, holds one token; a signed-in form is read only after its session is checked, and the
// largest, a template at the parse limit in every part, fits (./body-limits.ts).
consoleApp.use('*', consoleBodyLimit)

consoleApp.onError((error, c) => {
  // A refusal by a middleware (a cross-site form post) keeps its status.
  if (error instanceof HTTPException && error.status < 500) {
    const page = problemPage(c.get('page') ?? { nonce: '' }, 'Refused', 'This request was not sent by the console.')
    return c.html(page, error.status)
  }
  loggerFor(c.env).error('console.unexpected', { error })
  return c.html(problemPage(c.get('page') ?? { nonce: '' }, 'Something went wrong', 'See the Worker log.'), 500)
})

consoleApp.get('/sign-in', needsNobody, (c) => {
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

consoleApp.post('/sign-in', needsNobody, async (c) => {
  const config = configOf(c.env)
  if (sessionKeys(config).length === 0) return c.redirect('/console/sign-in', 303)
  // A client past the limit of failed attempts is refused whatever it sends (src/api/attempts.ts).
  const client = clientOf(c.req.raw)
  try {
    refuseIfThrottled(client, 'console')
  } catch (error) {
    return tooManyAttempts(c, error)
  }
  const form = await c.req.parseBody()
  const token = typeof form.token === 'string' ? form.token : ''
  const scope = token ? await scopeOfToken(token, config) : undefined
  if (scope !== 'admin' && scope !== 'viewer') {
    try {
      await failedAttempt(c.env, client, 'console')
    } catch (error) {
      return tooManyAttempts(c, error)
    }
    return c.redirect('/console/sign-in?failed=1', 303)
  }
  const via = await tokenFingerprint(token, config.CONSOLE_SESSION_KEY as string)
  await openSession(c, config, { name: `${scope} token`, role: scope, via })
  return c.redirect('/console', 303)
})

/** The 429 of a client past the limit of failed sign-ins, with its `Retry-After`; anything else thrown on. */
function tooManyAttempts(c: ConsoleContext, error: unknown) {
  if (!(error instanceof ApiError) || error.code !== 'TOO_MANY_ATTEMPTS') throw error
  c.header('retry-after', String(error.retryAfter ?? ATTEMPT_PERIOD_SECONDS))
  return c.html(
    problemPage(
      c.get('page'),
      'Too many attempts',
      `Too many wrong tokens from here: try again in ${error.retryAfter} s.`,
    ),
    429,
  )
}

// Every other page needs a session (./page-roles.ts); a post also needs its form's CSRF token.
consoleApp.post('/sign-out', needsViewer, async (c) => {
  const session = c.get('session')
  await endSession(c.env.DB, session.sid, new Date()).run()
  deleteCookie(c, SESSION_COOKIE, { path: '/', secure: true })
  // Behind Access, Access would sign its user in again at once: its own logout ends that.
  return c.redirect(session.via === 'access' ? '/cdn-cgi/access/logout' : '/console/sign-in', 303)
})

// Every session ends, this one too: a token that leaked with a cookie, a laptop left open. The
// tokens themselves are rotated apart (docs/operating.md, "Rotating a secret").
consoleApp.post('/sessions/end-all', needsAdmin, async (c) => {
  const now = new Date()
  const [ended] = await c.env.DB.batch([
    endAllSessions(c.env.DB, now),
    auditChange(c.env.DB, c.get('operator'), { action: 'console.sessions.end-all', target: null }, now.toISOString()),
  ])
  loggerFor(c.env).info('console.sessions-ended', { count: ended?.meta.changes ?? 0 })
  deleteCookie(c, SESSION_COOKIE, { path: '/', secure: true })
  return c.redirect('/console/sign-in', 303)
})

consoleApp.get('/', needsViewer, overviewPage)
consoleApp.route('/dead-letters', deadLetterPages)
consoleApp.route('/', eventPages)
consoleApp.route('/templates', templatePages)
consoleApp.route('/erasures', erasurePages)
consoleApp.route('/cancellations', cancellationPages)
consoleApp.route('/', lookupPages)
// Last: any other path or method under /console (a route's notFound does not carry over when
// mounted). A post there is refused to a viewer like any post that changes something; anything else
// is a signed-in operator's 404.
const notFound = (c: ConsoleContext) => c.html(problemPage(c.get('page'), 'Not found', 'No such page.'), 404)
consoleApp.post('*', needsAdmin, notFound)
consoleApp.all('*', needsViewer, notFound)
