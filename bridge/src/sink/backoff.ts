/**
 * Full-jitter exponential backoff: a random wait in [0, min(cap, base·2^attempt)].
 * @defaultValue base 200 ms, cap 30 s
 */
export function backoffMs(attempt: number, baseMs = 200, capMs = 30_000): number {
  return Math.random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt, 20))
}

/** Milliseconds a `Retry-After` header asks for (seconds or an HTTP date), if it is one. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined
  const seconds = Number(header)
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000)
  const date = Date.parse(header)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const timer = setTimeout(resolve, ms)
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer)
        resolve()
      },
      { once: true },
    )
  })
}
