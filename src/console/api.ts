import type { Context } from 'hono'
import { CONSOLE_OPERATOR, type EnvWithOperator } from '../api/auth.ts'
import type { Operator } from '../audit/operator.ts'

/** An answer of the API: its status and its JSON body (or null). */
export type Answer<T = Record<string, unknown>> = { status: number; body: T & { error?: ApiErrorBody } }

/** The error body of the API. */
export type ApiErrorBody = { code: string; message: string; issues?: { field: string; message: string }[] }

/** The Worker's fetch handler, given by the entry point (no import cycle: the API does not know the console). */
export type ApiFetch = (request: Request, env: EnvWithOperator, ctx: Context['executionCtx']) => Promise<Response>

let apiFetch: ApiFetch | undefined

/** Called once by the entry point with the API's fetch handler. */
export function connectApi(fetch: ApiFetch): void {
  apiFetch = fetch
}

/**
 * The operator API, called in-process as the signed-in operator: every change
 * a page makes, and every read of a record it shows, goes through the same
 * routes, validation, scopes and audit trail as the API and the CLI (what a
 * page reads from D1 itself is listed in ./app.tsx). The operator travels
 * beside the env under a symbol, which no HTTP request can carry.
 */
export function consoleApi(c: Context, operator: Operator) {
  const env: EnvWithOperator = { ...(c.env as Env), [CONSOLE_OPERATOR]: operator }
  return async <T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<Answer<T>> => {
    if (!apiFetch) throw new Error('the console is not connected to the API')
    const request = new Request(new URL(path, 'http://console.internal'), {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const response = await apiFetch(request, env, c.executionCtx)
    const text = await response.text()
    const json = (response.headers.get('content-type') ?? '').includes('json') && text ? JSON.parse(text) : null
    return { status: response.status, body: json as Answer<T>['body'] }
  }
}

/** A console API caller. */
export type ConsoleApi = ReturnType<typeof consoleApi>
