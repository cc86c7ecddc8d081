/**
 * The doctor's rules, in one place for the Worker (`GET /v1/health/config`),
 * the console's overview and the CLI (`npx notify-edge doctor`): a pure
 * function of a plain description of the deployment (./types.ts), so each
 * only describes what it can see and all judge alike.
 */
import { operatorFindings } from './operators.ts'
import { publicUrlFindings, senderFindings } from './sender.ts'
import { templateFindings } from './templates.ts'
import { deliveryEventFindings, pauseFindings, secretFindings } from './transport.ts'
import type { Deployment, Finding, Severity } from './types.ts'
import { bindingFindings, cronFindings } from './wiring.ts'

export type { Deployment, DomainCheck, Finding, Severity } from './types.ts'

const ORDER: Record<Severity, number> = { blocker: 0, warning: 1, info: 2 }

/**
 * Variables that are set and refused. One that is missing is not repeated
 * here: its own rule says what it is for (`sender-missing`, `secrets-missing`…).
 */
function invalidFindings(deployment: Deployment): Finding[] {
  const isSet = (name: string) => deployment.vars[name] !== undefined || deployment.secrets?.includes(name) === true
  const refused = deployment.invalid.filter((issue) => issue.variable === '' || isSet(issue.variable))
  if (refused.length === 0) return []
  const names = [...new Set(refused.map((issue) => issue.variable))]
  const consequence =
    deployment.source === 'worker' ? '; until they are fixed, every route but this one answers 500 CONFIG_INVALID' : ''
  return [
    {
      id: 'config-invalid',
      severity: 'blocker',
      message: `the configuration refuses ${refused.map((issue) => `${issue.variable} (${issue.message})`).join(', ')}${consequence}`,
      fix: `correct ${names.join(', ')} in wrangler.toml [vars], or with npx wrangler secret put for a secret; docs/configuration.md gives each one's form`,
    },
  ]
}

/** Every finding about `deployment`, blockers first. */
export function findingsOf(deployment: Deployment): Finding[] {
  const findings = [
    ...invalidFindings(deployment),
    ...senderFindings(deployment),
    ...secretFindings(deployment),
    ...pauseFindings(deployment),
    ...bindingFindings(deployment),
    ...cronFindings(deployment),
    ...publicUrlFindings(deployment),
    ...deliveryEventFindings(deployment),
    ...operatorFindings(deployment),
    ...templateFindings(deployment),
  ]
  // Array.prototype.sort is stable: within a severity, the order above.
  return findings.sort((a, b) => ORDER[a.severity] - ORDER[b.severity])
}

/** Whether anything stands between this deployment and a delivered email. */
export function hasBlocker(findings: readonly Finding[]): boolean {
  return findings.some((finding) => finding.severity === 'blocker')
}
