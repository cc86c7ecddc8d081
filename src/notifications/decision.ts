/** A decision as stored: who and what, which request, when. */
export type DecisionRef = { person: string; request: string | null; at: string | null }

/**
 * Whether two verification notifications are about the same decision: the
 * same person and decision, and the same request when both name one; when one
 * names none, decided within `windowSeconds` of each other (a later decision
 * for the same person — a new request — is a decision of its own). A row
 * without a time (written before decision times were kept) matches as before.
 * `sameDecisionSql` (./sql.ts) is this rule in SQL; a test keeps them equal.
 * The SQL compares rows, and asks for the same channel too; this one compares
 * an event's decision, which is every channel's.
 */
export function sameDecision(a: DecisionRef, b: DecisionRef, windowSeconds: number): boolean {
  if (a.person !== b.person) return false
  if (a.request !== null && b.request !== null) return a.request === b.request
  if (a.at === null || b.at === null) return true
  return Math.abs(Date.parse(a.at) - Date.parse(b.at)) <= windowSeconds * 1000
}
