/**
 * When a notification whose send failed transiently is tried again: after its
 * own backoff (`DISPATCH_RETRY_DELAYS_SECONDS[attempt - 1]`), and never
 * sooner than the provider asked (`Retry-After`, a limit's reset). The time
 * is kept on the row (`scheduled_at`), so a redelivery, a cron run or a
 * duplicate message cannot try it earlier. No time: the attempts are used up.
 *
 * @param attempt - the attempt that failed, counted on the row (1 for the first)
 * @param delays - seconds before attempts 2, 3, …
 * @param providerDelaySeconds - the shortest wait the provider named, if any
 */
export function nextTryAt(
  attempt: number,
  delays: readonly number[],
  providerDelaySeconds: number | undefined,
  now: Date,
): Date | undefined {
  const delay = delays[attempt - 1]
  if (delay === undefined) return undefined
  return new Date(now.getTime() + Math.max(delay, providerDelaySeconds ?? 0) * 1000)
}
