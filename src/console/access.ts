/**
 * Cloudflare Access in front of the console: each request carries the
 * `Cf-Access-Jwt-Assertion` JWT, verified with jose against the team's
 * published keys (issuer the team domain, audience the console application's
 * AUD). The operator is the JWT's e-mail; ACCESS_ADMINS says who may change
 * things.
 */
import { createRemoteJWKSet, jwtVerify } from 'jose'
import type { Config } from '../config.ts'

const keySets = new Map<string, ReturnType<typeof createRemoteJWKSet>>()

/** The team's key set, fetched once per isolate and refreshed by jose when a new key id appears. */
function keySetOf(team: string) {
  let keys = keySets.get(team)
  if (!keys) {
    keys = createRemoteJWKSet(new URL(`https://${team}/cdn-cgi/access/certs`))
    keySets.set(team, keys)
  }
  return keys
}

/** Who Access says is asking, or undefined when Access is not configured or the JWT does not hold. */
export async function accessIdentity(
  assertion: string | undefined,
  config: Config,
): Promise<{ email: string; role: 'admin' | 'viewer' } | undefined> {
  const team = config.ACCESS_TEAM_DOMAIN
  const audience = config.ACCESS_AUD
  if (!team || !audience || !assertion) return undefined
  try {
    const { payload } = await jwtVerify(assertion, keySetOf(team), { issuer: `https://${team}`, audience })
    const email = typeof payload.email === 'string' ? payload.email : undefined
    if (!email) return undefined
    const admins = (config.ACCESS_ADMINS ?? []).map((entry) => entry.toLowerCase())
    return { email, role: admins.includes(email.toLowerCase()) ? 'admin' : 'viewer' }
  } catch {
    return undefined
  }
}
