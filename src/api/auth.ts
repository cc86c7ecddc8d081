import { createMiddleware } from 'hono/factory'
import { configOf } from '../config.ts'
import { secretsEqual } from '../crypto.ts'
import { ApiError } from '../errors.ts'

/** The scopes of the bearer tokens: `ingest` may only post events, `admin` may do the rest. */
export type Scope = 'ingest' | 'admin'

/**
 * Requires `Authorization: Bearer <token>` of `scope`. No token or an unknown
 * one → 401; a known token of the other scope → 403. Both configured tokens
 * are always compared, in constant time.
 */
export function requireScope(scope: Scope) {
  return createMiddleware<{ Bindings: Env }>(async (c, next) => {
    const header = c.req.header('authorization') ?? ''
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header)
    if (!match?.[1]) throw new ApiError('UNAUTHORIZED', 'missing bearer token: send Authorization: Bearer <token>')
    const config = configOf(c.env)
    const [isIngest, isAdmin] = await Promise.all([
      secretsEqual(match[1], config.INGEST_TOKEN),
      secretsEqual(match[1], config.ADMIN_TOKEN),
    ])
    const granted: Scope | undefined = isAdmin ? 'admin' : isIngest ? 'ingest' : undefined
    if (granted === undefined) throw new ApiError('UNAUTHORIZED', 'unknown bearer token')
    if (granted !== scope) throw new ApiError('FORBIDDEN', `this route needs the ${scope} token`)
    await next()
  })
}
