/**
 * How operators get in: the console's session key and Cloudflare Access.
 * Neither stops an email; both decide who can see and fix what does.
 */
import type { Deployment, Finding } from './types.ts'

/** The console: open or closed, and behind Access or not. */
export function operatorFindings(deployment: Deployment): Finding[] {
  const findings: Finding[] = []
  if (deployment.secrets && !deployment.secrets.includes('CONSOLE_SESSION_KEY')) {
    findings.push({
      id: 'console-closed',
      severity: 'info',
      message: 'CONSOLE_SESSION_KEY is not set: the console is closed (the API and the CLI work)',
      fix: 'npx wrangler secret put CONSOLE_SESSION_KEY  # ≥ 32 random characters',
    })
  }
  const { ACCESS_TEAM_DOMAIN: team, ACCESS_AUD: audience, ACCESS_ADMINS: admins } = deployment.vars
  if (!team && !audience) {
    findings.push({
      id: 'access-off',
      severity: 'info',
      message: 'Cloudflare Access is not configured: the console opens with an operator token only',
      fix: 'optional: an Access application for /console* on a custom domain, then ACCESS_TEAM_DOMAIN, ACCESS_AUD and ACCESS_ADMINS in wrangler.toml (docs/deploy.md)',
    })
  } else if (!team || !audience) {
    const missing = team ? 'ACCESS_AUD' : 'ACCESS_TEAM_DOMAIN'
    findings.push({
      id: 'access-incomplete',
      severity: 'warning',
      message: `${team ? 'ACCESS_TEAM_DOMAIN' : 'ACCESS_AUD'} is set without ${missing}: Access identities are ignored, and the console opens with a token only`,
      fix: `set ${missing} in wrangler.toml (${missing === 'ACCESS_AUD' ? "the Access application's audience tag" : '<team>.cloudflareaccess.com'})`,
    })
  } else if (!admins) {
    findings.push({
      id: 'access-no-admins',
      severity: 'info',
      message: 'ACCESS_ADMINS is not set: everyone Access lets into the console only views',
      fix: 'set ACCESS_ADMINS in wrangler.toml to the e-mails that may change things (comma-separated)',
    })
  }
  return findings
}
