import { appendFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import { dirname } from 'node:path'

/**
 * Every console line of the whole test suite (workerd's included) is captured
 * here by `onConsoleLog`, and scanned when the run ends: no e-mail address,
 * display name or rejection reason of the test data may appear in any of them.
 */
export const CAPTURE = '.wrangler/test-console.log'

const FORBIDDEN: { name: string; pattern: RegExp }[] = [
  { name: 'an e-mail address', pattern: /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/ },
  { name: 'a display name', pattern: /Анна Клиент|Михаил Дизайнер|Тест Пользователь|Рецензент/ },
  { name: 'a rejection reason', pattern: /нечитаем|Нечитаем/ },
]

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

/** The captured lines that leak something, with what they leak. */
export function leaks(): string[] {
  const lines = readFileSync(CAPTURE, 'utf8').split('\n')
  const found: string[] = []
  for (const line of lines) {
    for (const { name, pattern } of FORBIDDEN) {
      const match = pattern.exec(line)
      if (match) found.push(`${name} (${match[0]}) in: ${line.slice(0, 300)}`)
    }
  }
  return found
}
