import { z } from 'zod'

/**
 * One problem the ingest route found with a request. `index` names the event
 * of the batch it belongs to, when it belongs to one: the bridge replaces
 * exactly those events by markers and retries anything else as the request's
 * own failure.
 */
export const RefusalIssueSchema = z.object({
  /** Dotted path, e.g. `events[3].sourceMessageId`. */
  field: z.string(),
  message: z.string(),
  /** The event of the batch this issue is about. */
  index: z.number().int().nonnegative().optional(),
})

/** The body of every 4xx and 5xx answer of the Worker: `{error: {code, message, issues?}}`. */
export const RefusalSchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    issues: z.array(RefusalIssueSchema).optional(),
  }),
})

/** One problem, as the route reports it. */
export type RefusalIssue = z.infer<typeof RefusalIssueSchema>

/** An error answer of the Worker. */
export type Refusal = z.infer<typeof RefusalSchema>

/** The index of the event a path like `events[3].headers.x` is about, if any. */
export function eventIndexOf(path: readonly PropertyKey[]): number | undefined {
  return path[0] === 'events' && typeof path[1] === 'number' ? path[1] : undefined
}
