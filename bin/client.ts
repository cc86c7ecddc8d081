/** A small client of the notify-edge HTTP API for the command line. */
export type Client = {
  get(path: string): Promise<unknown>
  post(path: string, body: unknown): Promise<unknown>
  put(path: string, body: unknown): Promise<unknown>
  delete(path: string): Promise<unknown>
}

/** An error answer: its status, and the seconds its `Retry-After` asks to wait, when it says. */
export class ApiAnswerError extends Error {
  readonly status: number
  readonly retryAfter: number | undefined

  constructor(message: string, status: number, retryAfter: number | undefined) {
    super(message)
    this.name = 'ApiAnswerError'
    this.status = status
    this.retryAfter = retryAfter
  }
}

/** Reads NOTIFY_EDGE_URL and NOTIFY_EDGE_TOKEN; an error answer becomes an ApiAnswerError with its code and message. */
export function createClient(environment: Record<string, string | undefined>): Client {
  const base = environment.NOTIFY_EDGE_URL ?? 'http://127.0.0.1:8787'
  const token = environment.NOTIFY_EDGE_TOKEN
  if (!token) throw new Error('set NOTIFY_EDGE_TOKEN to the admin token')
  const request = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(new URL(path, base), {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        // The Worker's audit trail records changes made from here as `via: cli`.
        'user-agent': 'notify-edge-cli/0.1.0',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await response.text()
    const json = text
      ? (JSON.parse(text) as {
          error?: { code: string; message: string; issues?: { field: string; message: string }[] }
        })
      : null
    if (!response.ok) {
      const issues = json?.error?.issues?.map((issue) => `\n  ${issue.field}: ${issue.message}`).join('') ?? ''
      const retryAfter = Number(response.headers.get('retry-after') ?? Number.NaN)
      throw new ApiAnswerError(
        `${response.status} ${json?.error?.code ?? ''}: ${json?.error?.message ?? text}${issues}`,
        response.status,
        Number.isFinite(retryAfter) ? retryAfter : undefined,
      )
    }
    return json
  }
  return {
    get: (path) => request('GET', path),
    post: (path, body) => request('POST', path, body),
    put: (path, body) => request('PUT', path, body),
    delete: (path) => request('DELETE', path),
  }
}
