/** Who is making an operator request, as the audit trail records it. */
export type Operator = {
  /** `admin token`, `viewer token`, or the e-mail of a Cloudflare Access identity. */
  name: string
  role: 'admin' | 'viewer'
  /** Where the request came from: the CLI says so in its User-Agent; the console sets its own. */
  via: 'api' | 'cli' | 'console'
}
