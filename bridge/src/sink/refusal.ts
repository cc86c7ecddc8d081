/**
 * What a 400 or 413 from the sink means. Only the ingest route's own error
 * (`{"error":{"code","message","issues":[{"field":"events[3]…"}]}}`) can name
 * events; anything else — a proxy's HTML 413, a load balancer's page, our error
 * without an event index — is a refusal of the request, which the sink treats
 * as transient: marking every event of a batch for one answer it cannot read
 * would turn a misconfigured proxy into a flood of dead letters.
 */
export type Refusal = { of: 'events'; reasons: Map<number, string> } | { of: 'request'; detail: string }

type RouteError = { error?: { code?: unknown; message?: unknown; issues?: unknown } }

/** Classifies a 400/413 answer to a batch of `count` events. */
export function classifyRefusal(text: string, count: number): Refusal {
  let body: RouteError
  try {
    body = JSON.parse(text) as RouteError
  } catch {
    return { of: 'request', detail: `not the route's JSON: ${text.slice(0, 200)}` }
  }
  const issues = Array.isArray(body?.error?.issues) ? (body.error.issues as unknown[]) : []
  const reasons = new Map<number, string>()
  for (const issue of issues) {
    if (typeof issue !== 'object' || issue === null) continue
    const { field, message } = issue as { field?: unknown; message?: unknown }
    if (typeof field !== 'string') continue
    const index = /^events\[(\d+)\]/.exec(field)?.[1]
    if (index === undefined || Number(index) >= count) continue
    const previous = reasons.get(Number(index))
    const text = `${field}: ${typeof message === 'string' ? message : 'refused'}`
    reasons.set(Number(index), previous ? `${previous}; ${text}` : text)
  }
  if (reasons.size > 0) return { of: 'events', reasons }
  const code = typeof body?.error?.code === 'string' ? body.error.code : 'unknown'
  const message = typeof body?.error?.message === 'string' ? body.error.message : ''
  return { of: 'request', detail: `${code}: ${message}`.slice(0, 300) }
}
