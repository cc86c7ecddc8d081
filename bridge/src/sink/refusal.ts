import { RefusalSchema } from '@notify-edge/contracts'

/**
 * What a 400 or 413 from the sink means. Only the ingest route's own error
 * (`{"error":{"code","message","issues":[{"index":3,"field":"events[3]…"}]}}`)
 * can name events, by index; anything else — a proxy's HTML 413, a load
 * balancer's page, our error without an index — is a refusal of the request,
 * which the sink treats as transient: marking every event of a batch for one
 * answer it cannot read would turn a misconfigured proxy into a flood of dead
 * letters.
 */
export type Refusal = { of: 'events'; reasons: Map<number, string> } | { of: 'request'; detail: string }

/** Classifies a 400/413 answer to a batch of `count` events. */
export function classifyRefusal(text: string, count: number): Refusal {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return { of: 'request', detail: `not the route's JSON: ${text.slice(0, 200)}` }
  }
  const parsed = RefusalSchema.safeParse(json)
  if (!parsed.success) return { of: 'request', detail: `not the route's error format: ${text.slice(0, 200)}` }
  const { code, message, issues = [] } = parsed.data.error
  const reasons = new Map<number, string>()
  for (const issue of issues) {
    if (issue.index === undefined || issue.index >= count) continue
    const previous = reasons.get(issue.index)
    const reason = `${issue.field}: ${issue.message}`
    reasons.set(issue.index, previous ? `${previous}; ${reason}` : reason)
  }
  if (reasons.size > 0) return { of: 'events', reasons }
  return { of: 'request', detail: `${code}: ${message}`.slice(0, 300) }
}
