import { appendFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import { dirname } from 'node:path'
import { leaksIn } from '../support/privacy.ts'

/**
 * Every console line of the whole test suite (workerd's included) is captured
 * here by `onConsoleLog`, and scanned when the run ends: no e-mail address,
 * display name or rejection reason of the test data may appear in any of them.
 * The Node-side tests scan what their child processes print the same way
 * (`assertNoLeaks` in support/child-output.ts).
 */
export const CAPTURE = '.wrangler/test-console.log'

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
  return leaksIn(readFileSync(CAPTURE, 'utf8'))
}
