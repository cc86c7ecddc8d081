/**
 * Two kinds of operator-facing URL carry what a log must not: an unsubscribe
 * link's path is its token (whoever holds it can opt the recipient out), and
 * a suppression's path is an e-mail address. Wherever notify-edge prints a
 * request path — its own error log, the request lines of `wrangler dev` that
 * `npm start` shows — they are replaced by a placeholder.
 */
const SECRET_PATHS: [RegExp, string][] = [
  [/\/u\/[^\s?#"']+/g, '/u/[token]'],
  [/\/v1\/suppressions\/[^\s?#"'/]+/g, '/v1/suppressions/[address]'],
]

/** `text` with every unsubscribe token and suppressed address in a URL path replaced. */
export function redactPaths(text: string): string {
  return SECRET_PATHS.reduce((out, [pattern, placeholder]) => out.replace(pattern, placeholder), text)
}
