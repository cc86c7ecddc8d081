import type { z } from 'zod'
import type { FieldIssue } from '../errors.ts'

/** `['data', 'recipient', 'email']` → `data.recipient.email`; numbers become `[n]`. */
export function formatPath(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`
    else out += out === '' ? String(key) : `.${String(key)}`
  }
  return out === '' ? '(root)' : out
}

/** zod issues as field issues, each path under `prefix`. */
export function toFieldIssues(error: z.ZodError, prefix = ''): FieldIssue[] {
  return error.issues.map((issue) => ({ field: formatPath(issue.path, prefix), message: issue.message }))
}

/** One line naming every field: `data.recipient.email: Invalid email address; …`. */
export function describeIssues(issues: readonly FieldIssue[]): string {
  return issues.map((issue) => `${issue.field}: ${issue.message}`).join('; ')
}
