/**
 * One template render at a time per operator, in this isolate: a preview or
 * a save that arrives while the same operator's last one is still being
 * read or rendered is answered 429 `TOO_MANY_PREVIEWS` with `Retry-After: 1`,
 * before its body is read.
 *
 * A render is synchronous work in the isolate that also runs the queue
 * consumers: twenty previews sent at once would run one after the other and
 * hold every other request back behind all of them (`BENCH_ONLY=preview npm
 * run bench`, before this: /healthz answered in 10 s instead of 12 ms). Taking
 * turns bounds what one operator holds back to one render, which the
 * preview's limits (`previewLimits`, a tenth of the pipeline's) keep small; a
 * few operators at once are bounded by `AT_ONCE`. The console's live preview
 * posts 400 ms after the last keystroke, one render at a time: it does not
 * meet the refusal unless a render outlasts the pause.
 */
import { createMiddleware } from 'hono/factory'
import type { Operator } from '../audit/operator.ts'
import { ApiError } from '../errors.ts'

/** Renders in flight in this isolate, by operator name: since when (ms), one object per turn. */
const rendering = new Map<string, { since: number }>()

/** Renders in flight in this isolate across operators. */
export const AT_ONCE = 4

/**
 * How long a turn is held at most. A request whose client went away can be
 * cancelled without its `finally` ever running; a turn older than this is
 * taken as such, not as a render (one at the preview's limits is over in well
 * under a second, a 1 MiB body read in a few), so no operator is locked out
 * of previews and saves for the isolate's life.
 */
export const TURN_STALE_MS = 30_000

/** Seconds a refused render is told to wait: one render, at the preview's limits, is over well within it. */
const RETRY_AFTER_SECONDS = 1

/**
 * Takes `name`'s turn at `now`: its release, or why not — this operator's
 * last render is still running, or `AT_ONCE` are. A release gives back only
 * its own turn, not one taken after it went stale.
 */
export function takeTurn(name: string, now: number): (() => void) | 'yours' | 'full' {
  for (const [holder, turn] of rendering) if (now - turn.since >= TURN_STALE_MS) rendering.delete(holder)
  if (rendering.has(name)) return 'yours'
  if (rendering.size >= AT_ONCE) return 'full'
  const turn = { since: now }
  rendering.set(name, turn)
  return () => {
    if (rendering.get(name) === turn) rendering.delete(name)
  }
}

/** Takes the operator's turn for the rest of the request (reading its body included), or refuses it. */
export const oneRenderAtATime = createMiddleware<{ Variables: { operator: Operator } }>(async (c, next) => {
  const release = takeTurn(c.get('operator').name, Date.now())
  if (typeof release !== 'function') {
    throw new ApiError(
      'TOO_MANY_PREVIEWS',
      release === 'yours'
        ? 'another preview or save of this operator is still rendering: try again in a second'
        : 'the Worker is rendering as many previews as it takes at once: try again in a second',
      undefined,
      { retryAfter: RETRY_AFTER_SECONDS },
    )
  }
  try {
    await next()
  } finally {
    release()
  }
})
