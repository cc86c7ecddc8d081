/**
 * Who may call a route, declared with the route: `operatorRoute('viewer', …)`
 * both requires that role and says so in /openapi.json (its `security`), so
 * the document and the check cannot differ. No list of paths decides who may
 * call what; test/route-roles.test.ts calls every documented route and every
 * console page with each token and fails on a route that declares no role or
 * answers another role than it declares.
 */
import { createRoute, type RouteConfig } from '@hono/zod-openapi'
import type { MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { ApiError } from '../errors.ts'
import { isRead, type OperatorCheck, type OperatorRole, requireOperator } from './auth.ts'
import { errors } from './openapi.ts'
import { requireRecipient } from './recipient-auth.ts'

/**
 * Who may call a route: anyone (`public`: a route that needs no token, or
 * checks a proof of its own — a webhook's signature, an unsubscribe link's
 * token), the bridge (`ingest`), an operator who reads (`viewer`: the viewer
 * or the admin token), an admin, or an end user with the inbox token its host
 * application signed (`recipient`: their own feed only).
 */
export type Role = 'public' | 'ingest' | OperatorRole | 'recipient'

/** The bearer schemes of /openapi.json, each a token (its current or previous value). */
export const SECURITY_SCHEMES = {
  ingestToken: 'INGEST_TOKEN (or INGEST_TOKEN_PREVIOUS): the bridge, ingest only',
  viewerToken: 'VIEWER_TOKEN (or VIEWER_TOKEN_PREVIOUS): the operator routes that only read',
  adminToken: 'ADMIN_TOKEN (or ADMIN_TOKEN_PREVIOUS): every operator route',
  inboxToken:
    'an end user’s inbox token: a JWT (HS256) the host application signs with INBOX_TOKEN_SECRET, naming the user (`sub`), `aud` "notify-edge:inbox" and `exp` at most a day ahead; their own feed only',
}

type Scheme = keyof typeof SECURITY_SCHEMES

/** The OpenAPI security requirement of each role: any one of the schemes listed will do. */
export const SECURITY_OF: Record<Role, Partial<Record<Scheme, string[]>>[]> = {
  // An empty list, not a missing one: this route was declared open.
  public: [],
  ingest: [{ ingestToken: [] }],
  viewer: [{ viewerToken: [] }, { adminToken: [] }],
  admin: [{ adminToken: [] }],
  recipient: [{ inboxToken: [] }],
}

/** Largest body of an operator request (a template is the largest). */
const OPERATOR_MAX_BYTES = 1024 * 1024

// Operator requests are small; ingest and the webhooks keep limits of their own.
const operatorBodyLimit = bodyLimit({
  maxSize: OPERATOR_MAX_BYTES,
  onError: () => {
    throw new ApiError('PAYLOAD_TOO_LARGE', `request body exceeds ${OPERATOR_MAX_BYTES} bytes`)
  },
})

/**
 * An operator route that requires `role` — checked before the request is
 * validated, so a caller without it learns nothing from a 400 — with the
 * operator body limit. A POST that changes nothing (a preview) is declared
 * `viewer` like a read; a read of what only admins see, `admin`. `before`
 * runs after the check and before the body is read (a render's turn).
 */
export function operatorRoute<const R extends Omit<RouteConfig, 'security' | 'middleware'>>(
  role: OperatorRole,
  config: R,
  check: OperatorCheck = {},
  before: MiddlewareHandler[] = [],
) {
  return createRoute({
    ...config,
    // A change may wait while the D1 shards grow (./shard-hold.ts): 503 SHARDS_GROWING.
    responses: isRead(config.method.toUpperCase()) ? config.responses : { ...errors(503), ...config.responses },
    security: SECURITY_OF[role],
    middleware: [requireOperator(role, check), ...before, operatorBodyLimit] as const,
  })
}

/** Largest body of an inbox request: a list of at most 100 ids. */
const RECIPIENT_MAX_BYTES = 16 * 1024

const recipientBodyLimit = bodyLimit({
  maxSize: RECIPIENT_MAX_BYTES,
  onError: () => {
    throw new ApiError('PAYLOAD_TOO_LARGE', `request body exceeds ${RECIPIENT_MAX_BYTES} bytes`)
  },
})

/** An end user's route: their inbox token (./recipient-auth.ts) names the only feed it reaches. */
export function recipientRoute<const R extends Omit<RouteConfig, 'security' | 'middleware'>>(config: R) {
  return createRoute({
    ...config,
    responses: { ...errors(401, 429), ...config.responses },
    security: SECURITY_OF.recipient,
    middleware: [requireRecipient(), recipientBodyLimit] as const,
  })
}

/** A route anyone may call: it needs no token, or checks its own proof (an unsubscribe link's token). */
export function publicRoute<const R extends Omit<RouteConfig, 'security' | 'middleware'>>(config: R) {
  return createRoute({ ...config, security: SECURITY_OF.public })
}
