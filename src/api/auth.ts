import { createMiddleware } from 'hono/factory'
import type { Operator } from '../audit/operator.ts'
import { type Config, configOf, TOKEN_NAMES, tokensOf } from '../config.ts'
import { secretsEqual } from '../crypto.ts'
import { ApiError } from '../errors.ts'
import { clientOf, failedAttempt, refuseIfThrottled } from './attempts.ts'
import type { AppEnv } from './openapi.ts'

/** The scopes of the bearer tokens: `ingest` may only post events, `viewer` may read, `admin` may do the rest. */
export type Scope = 'ingest' | 'viewer' | 'admin'

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
    const client = clientOf(c.req.raw)
    refuseIfThrottled(client, 'ingest')
    const scope = await scopeOfToken(bearerOf(c.req.header('authorization')), configOf(c.env))
    if (scope === undefined) {
      await failedAttempt(c.env, client, 'ingest')
      throw new ApiError('UNAUTHORIZED', 'unknown bearer token')
    }
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

/** The roles an operator route may require: a viewer's token reads, an admin's does everything. */
export type OperatorRole = Operator['role']

const READS = new Set(['GET', 'HEAD'])

/** Whether a request of `method` reads (GET, HEAD): a viewer's refusal says whether it asked to read or to change. */
export const isRead = (method: string): boolean => READS.has(method)

/** Why `who`, a viewer, may not make this request to a route that needs an admin. */
function viewerRefusal(method: string, who: string): string {
  return isRead(method)
    ? `${who} may not read this; it needs an admin`
    : `${who} may only read; this change needs an admin`
}

/** How a route's operator is checked, besides its role. */
export type OperatorCheck = {
  /**
   * Parse the tokens alone, not the whole configuration: for the route that
   * reports a broken configuration (`GET /v1/health/config`), so it must
   * answer while the rest of it does not parse. Any other route answers 500
   * `CONFIG_INVALID` then.
   */
  tokensAlone?: boolean
}

/**
 * Requires an operator of `role`: no token or an unknown one → 401, the
 * ingest token → 403, the viewer token on a route that needs an admin → 403.
 * The console's signed-in operator (beside the env, `consoleApi`) is taken as
 * it is, its role checked the same way. Sets `operator` for the audit trail.
 */
export function requireOperator(role: OperatorRole, check: OperatorCheck = {}) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const signedIn = (c.env as EnvWithOperator)[CONSOLE_OPERATOR]
    if (signedIn) {
      if (role === 'admin' && signedIn.role !== 'admin') {
        throw new ApiError('FORBIDDEN', viewerRefusal(c.req.method, 'a viewer'))
      }
      c.set('operator', signedIn)
      return next()
    }
    const tokens = check.tokensAlone ? tokensOf(c.env) : configOf(c.env)
    const client = clientOf(c.req.raw)
    refuseIfThrottled(client, 'api')
    const scope = await scopeOfToken(bearerOf(c.req.header('authorization')), tokens)
    if (scope === undefined) {
      await failedAttempt(c.env, client, 'api')
      throw new ApiError('UNAUTHORIZED', 'unknown bearer token')
    }
    if (scope === 'ingest') throw new ApiError('FORBIDDEN', 'this route needs the admin token')
    if (role === 'admin' && scope === 'viewer') {
      throw new ApiError('FORBIDDEN', viewerRefusal(c.req.method, 'the viewer token'))
    }
    const via = /^notify-edge-cli\//.test(c.req.header('user-agent') ?? '') ? 'cli' : 'api'
    c.set('operator', { name: `${scope} token`, role: scope, via })
    await next()
  })
}
