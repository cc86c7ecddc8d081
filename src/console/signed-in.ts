/**
 * Who is signed in to the console: the session cookie's operator while the
 * token it was opened with is still configured (or Access still says so) and
 * its row in D1 is live (not signed out, not idle, not past its lifetime),
 * or else a Cloudflare Access identity, for which a session is opened.
 */
import { getCookie, setCookie } from 'hono/cookie'
import { type Config, configOf } from '../config.ts'
import { secretsEqual } from '../crypto.ts'
import { accessIdentity } from './access.ts'
import type { ConsoleContext } from './context.ts'
import { newCsrfToken, SESSION_COOKIE, type Session, signSession, tokenFingerprint, verifySession } from './session.ts'
import { insertSession, renewSession, type SessionLimits } from './sessions.ts'

/** A session's idle time and lifetime, from the configuration. */
export const sessionLimits = (config: Config): SessionLimits => ({
  idleMs: config.CONSOLE_SESSION_IDLE_MINUTES * 60_000,
  lifetimeMs: config.CONSOLE_SESSION_HOURS * 3_600_000,
})

/** The session keys in force, current first; none: the console is closed. */
export const sessionKeys = (config: Config) =>
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

/** Opens a session for `fields`: its row written, its cookie set on the answer, its CSRF token made. */
export async function openSession(
  c: ConsoleContext,
  config: Config,
  fields: Omit<Session, 'exp' | 'csrf' | 'sid'>,
): Promise<Session> {
  const key = config.CONSOLE_SESSION_KEY as string
  const session: Session = {
    ...fields,
    sid: newCsrfToken(),
    csrf: newCsrfToken(),
    exp: Math.floor(Date.now() / 1000) + config.CONSOLE_SESSION_HOURS * 3600,
  }
  await insertSession(c.env.DB, { id: session.sid, name: session.name, role: session.role }, new Date()).run()
  setCookie(c, SESSION_COOKIE, await signSession(session, key), {
    httpOnly: true,
    secure: true,
    sameSite: 'Strict',
    path: '/',
    maxAge: config.CONSOLE_SESSION_HOURS * 3600,
  })
  return session
}

/**
 * The signed-in session: the cookie's, checked against its token or Access;
 * else one from Access; else none. Without a session key there are no
 * sessions, from the form or from Access: the sign-in page says so.
 */
export async function signedInSession(c: ConsoleContext): Promise<Session | undefined> {
  const config = configOf(c.env)
  if (sessionKeys(config).length === 0) return undefined
  const access = await accessIdentity(c.req.header('cf-access-jwt-assertion'), config)
  const now = new Date()
  const session = await verifySession(getCookie(c, SESSION_COOKIE), sessionKeys(config), now)
  const vouched =
    session?.via === 'access'
      ? access !== undefined && access.email === session.name && access.role === session.role
      : session !== undefined && (await tokenStillValid(session, config))
  // Last, the server's word: a session signed out, signed out by an admin, or idle is over.
  if (session && vouched && (await renewSession(c.env.DB, session.sid, now, sessionLimits(config)))) return session
  if (access) return openSession(c, config, { name: access.email, role: access.role, via: 'access' })
  return undefined
}
