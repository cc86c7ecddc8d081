// No Worker types here: the CLI (Node) reads the same shape.

/** An audit row as the API shows it. */
export type AuditRecord = {
  id: number
  at: string
  actor: string
  role: string
  via: string
  action: string
  target: string | null
  parameters: Record<string, unknown>
  affected: number
}
