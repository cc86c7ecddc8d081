import { appendFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import { dirname } from 'node:path'

/**
 * Every console line of the whole test suite (workerd's included) is captured
 * here by `onConsoleLog`, and scanned when the run ends: no e-mail address,
 * display name or rejection reason of the test data may appear in any of them.
 * The Node-side tests scan what their child processes print the same way
 * (`assertNoLeaks` in bridge/test/helpers.ts).
 */
export const CAPTURE = '.wrangler/test-console.log'

const FORBIDDEN: { name: string; pattern: RegExp }[] = [
  { name: 'an e-mail address', pattern: /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g },
  { name: 'a display name', pattern: /Анна Клиент|Михаил Дизайнер|Тест Пользователь|Рецензент/g },
  { name: 'a rejection reason', pattern: /нечитаем|Нечитаем/g },
]

/**
 * The sender's own domain: its address (EMAIL_FROM, which wrangler prints
 * among the variables) and the Message-IDs made from it (wrangler names each
 * local mail file after one) are the system's, not a person's.
 */
const OWN_DOMAIN = /@notify-edge\.example(\.|$)/

/** Appends one captured console line. */
export function capture(line: string): void {
  appendFileSync(CAPTURE, line.endsWith('\n') ? line : `${line}\n`)
}

/** Starts a fresh capture file. */
export function resetCapture(): void {
  mkdirSync(dirname(CAPTURE), { recursive: true })
  rmSync(CAPTURE, { force: true })
  appendFileSync(CAPTURE, '')
}

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

/** The captured lines that leak something, with what they leak. */
export function leaks(): string[] {
  return leaksIn(readFileSync(CAPTURE, 'utf8'))
}
