/**
 * The doctor's findings at the top of the overview: what stands between this
 * deployment and a delivered email (blockers), and what else breaks
 * (warnings), each with its fix — the answer of `GET /v1/health/config`, the
 * same rules as `npx notify-edge doctor`. Admins only, as the route is.
 */
import type { Finding } from '../../health/findings.ts'
import type { ConsoleContext } from '../context.ts'

/** The findings to show, or undefined for a viewer (the route is an admin's) or when the route failed. */
export async function findingsFor(c: ConsoleContext): Promise<Finding[] | undefined> {
  if (c.get('operator').role !== 'admin') return undefined
  const answer = await c.get('api')<{ findings: Finding[] }>('GET', '/v1/health/config')
  return answer.status === 200 ? answer.body.findings : undefined
}

/** The blockers and warnings, each with its fix; a line for the rest. */
export function FindingsPanel(props: { findings: Finding[] | undefined }) {
  const { findings } = props
  if (!findings) return null
  const shown = findings.filter((finding) => finding.severity !== 'info')
  const info = findings.length - shown.length
  if (shown.length === 0) {
    return (
      <p id="findings" class="ok" role="status">
        Configuration: nothing stands between this deployment and a delivered email
        {info > 0 ? ` (${info} notes: npx notify-edge doctor)` : ''}.
      </p>
    )
  }
  const blockers = shown.filter((finding) => finding.severity === 'blocker').length
  return (
    <section id="findings" class={blockers > 0 ? 'error' : 'note'} aria-labelledby="findings-title">
      <h2 id="findings-title">
        Configuration: {blockers} {blockers === 1 ? 'blocker' : 'blockers'}, {shown.length - blockers}{' '}
        {shown.length - blockers === 1 ? 'warning' : 'warnings'}
      </h2>
      <ul>
        {shown.map((finding) => (
          <li data-finding={finding.id}>
            <strong>{finding.severity}</strong> <code>{finding.id}</code>: {finding.message}
            <br />
            Fix: <code>{finding.fix}</code>
          </li>
        ))}
      </ul>
      {info > 0 ? <p>{info} more notes: npx notify-edge doctor.</p> : null}
    </section>
  )
}
