/**
 * What no log line or printed output of notify-edge may carry: an e-mail
 * address, a display name or a rejection reason of the test data, or an
 * unsubscribe token (it opts its recipient out of a kind).
 */
const FORBIDDEN: { name: string; pattern: RegExp }[] = [
  // Percent-encoded too: an address in a URL path or query reads `name%40example.com`.
  {
    name: 'an e-mail address',
    pattern: /[A-Za-z0-9._%+-]+(@|%40)[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g,
  },
  { name: 'a display name', pattern: /Анна Клиент|Михаил Дизайнер|Тест Пользователь|Рецензент/g },
  { name: 'a rejection reason', pattern: /нечитаем|Нечитаем/g },
  { name: 'an unsubscribe token', pattern: /v1\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{43}/g },
]

/**
 * The sender's own domain: its address (EMAIL_FROM, which wrangler prints
 * among the variables) and the Message-IDs made from it (wrangler names each
 * local mail file after one) are the system's, not a person's.
 */
const OWN_DOMAIN = /(@|%40)notify-edge\.example(\.|$)/

/** The lines of `text` that leak something, with what they leak. */
export function leaksIn(text: string): string[] {
  const found: string[] = []
  for (const line of text.split('\n')) {
    for (const { name, pattern } of FORBIDDEN) {
      for (const [match] of line.matchAll(pattern)) {
        if (!OWN_DOMAIN.test(match)) found.push(`${name} (${match}) in: ${line.slice(0, 300)}`)
      }
    }
  }
  return found
}
