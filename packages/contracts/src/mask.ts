const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g

/**
 * `anna.client@example.com` → `a***@example.com`. Both the Worker's and the
 * bridge's loggers put every string through it, so a careless field cannot
 * leak an address.
 */
export function maskEmails(text: string): string {
  return text.replace(EMAIL, (address) => `${address[0]}***@${address.slice(address.indexOf('@') + 1)}`)
}
