/**
 * When a notification whose send failed transiently is tried again: after the
 * delay the retry policy gives its row's attempt (`settle` in
 * src/queue/policy.ts, over DISPATCH_RETRY_DELAYS_SECONDS), and never sooner
 * than the provider asked (`Retry-After`, a limit's reset). The time is kept
 * on the row (`scheduled_at`), so a redelivery, a cron run or a duplicate
 * message cannot try it earlier.
 *
 * @param delaySeconds - the policy's delay before the next attempt
 * @param providerDelaySeconds - the shortest wait the provider named, if any
 */
export function nextTryAt(delaySeconds: number, providerDelaySeconds: number | undefined, now: Date): Date {
  return new Date(now.getTime() + Math.max(delaySeconds, providerDelaySeconds ?? 0) * 1000)
}
