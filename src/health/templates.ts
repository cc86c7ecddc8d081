/**
 * The doctor's rule on the stored templates in effect that do not render
 * their kind's example (./template-check.ts, which the Worker runs).
 */
import type { Deployment, Finding } from './types.ts'

/** A blocker when a stored template in effect cannot be parsed at all; a warning when only its example breaks a limit. */
export function templateFindings(deployment: Deployment): Finding[] {
  const refused = deployment.templatesRefused ?? []
  if (refused.length === 0) return []
  return [
    {
      id: 'templates-refused',
      severity: refused.some((template) => !template.parses) ? 'blocker' : 'warning',
      message: `stored templates in effect that do not render their kind's example within the limits — their events end as dead letters NTF_TEMPLATE_INVALID: ${refused.map((template) => `${template.template} (${template.message})`).join('; ')}`,
      fix: "save a version that renders (the console's template editor, or PUT /v1/templates/{kind}/{locale}/{channel}), roll back to one that does, or raise the limit named; then replay the dead letters",
    },
  ]
}
