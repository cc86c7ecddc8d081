/** What the child processes of a test run print, kept for the privacy scan. */
import { leaksIn } from './privacy.ts'

const outputs: { name: string; read: () => string }[] = []

/** Registers what a child process (the bridge, wrangler, the CLI) prints, for `assertNoLeaks`. */
export function watchOutput(name: string, read: () => string): void {
  outputs.push({ name, read })
}

/** Every line a watched child process printed that holds an e-mail address, a display name or a rejection reason. */
export function leakedLines(): string[] {
  return outputs.flatMap(({ name, read }) => leaksIn(read()).map((leak) => `${name}: ${leak}`))
}

/**
 * Fails when anything a child process of this test file printed leaks
 * personal data — the same scan the Worker's own log lines get.
 */
export function assertNoLeaks(): void {
  const found = leakedLines()
  if (found.length > 0) {
    throw new Error(`${found.length} line(s) of child output leak personal data:\n${found.slice(0, 20).join('\n')}`)
  }
}
