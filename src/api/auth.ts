import { createMiddleware } from 'hono/factory'
import { type Config, configOf, TOKEN_NAMES, tokensOf } from '../config.ts'
import { secretsEqual } from '../crypto.ts'
import { ApiError } from '../errors.ts'

/** The scopes of the bearer tokens: `ingest` may only post events, `viewer` may read, `admin` may do the rest. */
export type Scope = 'ingest' | 'viewer' | 'admin'

/** Who is making an operator request, as the audit trail records it. */
export type Operator = {
  /** `admin token`, `viewer token`, or the e-mail of a Cloudflare Access identity. */
  name: string
  role: 'admin' | 'viewer'
  /** Where the request came from: the CLI says so in its User-Agent; the console sets its own. */
  via: 'api' | 'cli' | 'console'
}

const SCOPE_OF: Record<(typeof TOKEN_NAMES)[number], Scope> = {
  INGEST_TOKEN: 'ingest',
  INGEST_TOKEN_PREVIOUS: 'ingest',
  ADMIN_TOKEN: 'admin',
  ADMIN_TOKEN_PREVIOUS: 'admin',
  VIEWER_TOKEN: 'viewer',
  VIEWER_TOKEN_PREVIOUS: 'viewer',
}

/**
 * The scope of a token, or undefined for one this Worker does not know. Every
 * configured token — current and previous — is compared, each in constant
 * time, so the answer takes as long whichever matched.
 */
export async function scopeOfToken(
  token: string,
  config: Pick<Config, (typeof TOKEN_NAMES)[number]>,
): Promise<Scope | undefined> {
  const configured = TOKEN_NAMES.flatMap((name) => {
    const value = config[name]
    return value === undefined ? [] : [{ name, value }]
  })
  const matches = await Promise.all(configured.map(({ value }) => secretsEqual(token, value)))
  const found = configured.find((_, index) => matches[index])
  return found ? SCOPE_OF[found.name] : undefined
}

/** The token of `Authorization: Bearer <token>`; 401 without one. */
export function bearerOf(header: string | undefined): string {
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header ?? '')
  if (!match?.[1]) throw new ApiError('UNAUTHORIZED', 'missing bearer token: send Authorization: Bearer <token>')
  return match[1]
}

/**
 * Requires the ingest token (current or previous). No token or an unknown
 * one → 401; an operator's token → 403.
 */
export function requireIngest() {
  return createMiddleware<{ Bindings: Env }>(async (c, next) => {
    const scope = await scopeOfToken(bearerOf(c.req.header('authorization')), configOf(c.env))
    if (scope === undefined) throw new ApiError('UNAUTHORIZED', 'unknown bearer token')
    if (scope !== 'ingest') throw new ApiError('FORBIDDEN', 'this route needs the ingest token')
    await next()
  })
}

/**
 * The key under which the console hands its signed-in operator to the API it
 * calls in-process (`consoleApi`). A symbol: no HTTP request can carry it.
 */
export const CONSOLE_OPERATOR: unique symbol = Symbol('console operator')

/** The env the console passes to the API: the Worker's, with the operator beside it. */
export type EnvWithOperator = Env & { [CONSOLE_OPERATOR]?: Operator }

const READS = new Set(['GET', 'HEAD'])

/** POST routes that change nothing: a viewer may call them. */
const READ_ONLY_POSTS = new Set(['/v1/templates/preview'])

/** The configuration's health: what secrets are set and where the deployment is weak is for admins alone. */
const HEALTH_CONFIG = '/v1/health/config'

/** Reads a viewer may not make. */
const ADMIN_READS = new Set([HEALTH_CONFIG])

const isRead = (method: string, path: string) => READS.has(method) || (method === 'POST' && READ_ONLY_POSTS.has(path))

/** Why a viewer (`who`) may not make this request, or undefined when it may. */
function viewerRefusal(method: string, path: string, who: string): string | undefined {
  if (ADMIN_READS.has(path)) return `${who} may not read this; it needs an admin`
  return isRead(method, path) ? undefined : `${who} may only read; this change needs an admin`
}

/**
 * Requires an operator's token: the admin token for everything, the viewer
 * token for reads only (a change, or an admin's read → 403). Sets `operator`
 * for the audit trail. The health route parses the tokens alone: it must
 * answer with the rest of the configuration broken, since it reports it.
 */
export function requireOperator() {
  return createMiddleware<{ Bindings: Env; Variables: { operator: Operator } }>(async (c, next) => {
    const signedIn = (c.env as EnvWithOperator)[CONSOLE_OPERATOR]
    if (signedIn) {
      const refusal = signedIn.role === 'viewer' ? viewerRefusal(c.req.method, c.req.path, 'a viewer') : undefined
      if (refusal) throw new ApiError('FORBIDDEN', refusal)
      c.set('operator', signedIn)
      return next()
    }
    const tokens = c.req.path === HEALTH_CONFIG ? tokensOf(c.env) : configOf(c.env)
    const scope = await scopeOfToken(bearerOf(c.req.header('authorization')), tokens)
    if (scope === undefined) throw new ApiError('UNAUTHORIZED', 'unknown bearer token')
    if (scope === 'ingest') throw new ApiError('FORBIDDEN', 'this route needs the admin token')
    const refusal = scope === 'viewer' ? viewerRefusal(c.req.method, c.req.path, 'the viewer token') : undefined
    if (refusal) throw new ApiError('FORBIDDEN', refusal)
    const via = /^notify-edge-cli\//.test(c.req.header('user-agent') ?? '') ? 'cli' : 'api'
    c.set('operator', { name: `${scope} token`, role: scope, via })
    await next()
  })
}
