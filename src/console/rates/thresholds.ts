/**
 * The bounce and complaint rates mailbox providers and the email provider
 * publish for senders, each with the words of its page and its address (read
 * 2026-12, from copies of 2026-03 for Google and 2026-05 for Yahoo;
 * docs/operating.md, "Charts and rates"). The console rates each
 * kind against all of them: Resend's bind only an account at Resend, but its
 * 4 % is the one bounce limit published, and its 0.08 % lies just under
 * Google's 0.10 % — guidance worth heeding through any transport.
 */

/** A published page and what it says. */
export type Source = { who: string; title: string; url: string; says: string }

/** The pages. */
export const SOURCES = {
  google: {
    who: 'Google',
    title: 'Email sender guidelines',
    url: 'https://support.google.com/a/answer/81126',
    says: 'Keep spam rates reported in Postmaster Tools below 0.10% and avoid ever reaching a spam rate of 0.30% or higher.',
  },
  yahoo: {
    who: 'Yahoo',
    title: 'Sender Best Practices',
    url: 'https://senders.yahooinc.com/best-practices/',
    says: 'Keep your spam rate below 0.3%. Spam rate is calculated in our system based on mail delivered to the inbox.',
  },
  resend: {
    who: 'Resend',
    title: 'Acceptable Use Policy',
    url: 'https://resend.com/legal/acceptable-use',
    says: 'Your complaint rate must be lower than 0.08%. Your bounce rate must be lower than 4%. If complaint or bounce rates go above these thresholds, your account may be shutdown without warning.',
  },
} as const satisfies Record<string, Source>

/** A rate that has published limits. */
export type LimitedRate = 'bounce' | 'complaint'

/** One published limit: a rate at or above `limit` (a fraction) is past it. */
export type Limit = { rate: LimitedRate; limit: number; source: keyof typeof SOURCES }

/** Every limit, lowest first within a rate. */
export const LIMITS: readonly Limit[] = [
  { rate: 'complaint', limit: 0.0008, source: 'resend' },
  { rate: 'complaint', limit: 0.001, source: 'google' },
  { rate: 'complaint', limit: 0.003, source: 'google' },
  { rate: 'complaint', limit: 0.003, source: 'yahoo' },
  { rate: 'bounce', limit: 0.04, source: 'resend' },
]

/** The limits of `rate`, lowest first. */
export function limitsOf(rate: LimitedRate): Limit[] {
  return LIMITS.filter((limit) => limit.rate === rate)
}
