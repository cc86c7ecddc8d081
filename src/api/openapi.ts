import { OpenAPIHono, z } from '@hono/zod-openapi'
import { type Refusal, toFieldIssues } from '@notify-edge/contracts'
import type { Operator } from '../audit/operator.ts'
import { ApiError } from '../errors.ts'
import type { Recipient } from '../inbox/token.ts'

/**
 * Hono environment of every route; `operator` is set on the operator routes
 * (auth.ts), `recipient` on an end user's inbox routes (recipient-auth.ts).
 */
export type AppEnv = { Bindings: Env; Variables: { operator: Operator; recipient: Recipient } }

/**
 * A router whose request validation failures become `INVALID_REQUEST` with
 * one issue per field, through the one `app.onError`.
 */
export function createRouter(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) {
        throw new ApiError('INVALID_REQUEST', 'the request does not match its schema', toFieldIssues(result.error))
      }
    },
  })
}

/** `{error:{code,message,issues?}}`, the body of every non-2xx answer (the contracts' refusal format). */
export const ErrorSchema = z
  .object({
    error: z.object({
      code: z.string().openapi({ example: 'NOT_FOUND' }),
      message: z.string(),
      issues: z
        .array(
          z.object({
            field: z.string(),
            message: z.string(),
            index: z.number().int().nonnegative().optional().openapi({ description: 'the ingest event it is about' }),
          }),
        )
        .optional(),
    }),
  })
  .openapi('Error') satisfies z.ZodType<Refusal>

const DESCRIPTIONS: Record<number, string> = {
  400: 'Bad request: `issues` names each field',
  401: 'No bearer token, or an unknown one',
  403: 'A token without the scope this route needs',
  404: 'No such resource',
  409: 'Conflicts with the current state',
  413: 'Too large',
  415: 'The body is not application/json',
  429: 'Too many wrong tokens from this client, or a render while the last is still running: wait `Retry-After` seconds',
  500: 'Unexpected error',
  503: 'A dependency is unavailable, or the D1 shards are growing (`SHARDS_GROWING`): try again after `Retry-After`',
}

/** The OpenAPI error responses of a route. */
export function errors(...statuses: number[]) {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      { description: DESCRIPTIONS[status] ?? 'Error', content: { 'application/json': { schema: ErrorSchema } } },
    ]),
  )
}

/** Error responses of a route that takes a JSON body: it is malformed or invalid (400), or not JSON (415). */
export const BODY_ERRORS = [400, 415] as const

/** Error responses every operator route can give (413: any request body over the operator limit; 429: a throttled client). */
export const ADMIN_ERRORS = [401, 403, 413, 429, 500] as const

/** A JSON response of `schema`. */
export function json<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { 'application/json': { schema } } }
}

/** A required JSON request body of `schema`. */
export function jsonBody<T extends z.ZodType>(schema: T) {
  return { required: true, content: { 'application/json': { schema } } }
}
