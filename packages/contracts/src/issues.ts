import type { z } from 'zod'
import { eventIndexOf, type RefusalIssue as FieldIssue } from './refusal.ts'

/** `['data', 'recipient', 'email']` → `data.recipient.email`; numbers become `[n]`. */
export function formatPath(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`
    else out += out === '' ? String(key) : `.${String(key)}`
  }
  return out === '' ? '(root)' : out
}

/**
 * zod issues as field issues, each path under `prefix`. An issue under
 * `events[n]` (an ingest request) also carries `index: n`.
 */
export function toFieldIssues(error: z.ZodError, prefix = ''): FieldIssue[] {
  return error.issues.map((issue) => {
    const index = eventIndexOf(issue.path)
    const field = formatPath(issue.path, prefix)
    return index === undefined ? { field, message: issue.message } : { field, message: issue.message, index }
  })
}

/** One line naming every field: `data.recipient.email: Invalid email address; …`. */
export function describeIssues(issues: readonly FieldIssue[]): string {
  return issues.map((issue) => `${issue.field}: ${issue.message}`).join('; ')
}
