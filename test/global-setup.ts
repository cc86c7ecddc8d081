import { CAPTURE, leaks, resetCapture } from './log-privacy.ts'

export function setup(): void {
  resetCapture()
}

/** Fails the run when any captured log line leaks personal data. */
export function teardown(): void {
  const found = leaks()
  if (found.length > 0) {
    throw new Error(`${found.length} log line(s) in ${CAPTURE} leak personal data:\n${found.slice(0, 20).join('\n')}`)
  }
  console.log(`log privacy: scanned ${CAPTURE}, no e-mail address, display name or rejection reason`)
}
