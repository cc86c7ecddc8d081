/** notify-edge's version, as package.json names it (a test keeps the two equal). */
export const VERSION = '0.1.0'

/**
 * The `User-Agent` of every request to an email provider. Resend refuses a
 * request without one (403, error 1010: "All API requests must include a
 * User-Agent header", https://resend.com/docs/api-reference/introduction),
 * and a Worker's `fetch` sends none of its own.
 */
export const USER_AGENT = `notify-edge/${VERSION}`
