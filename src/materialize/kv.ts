import type { Logger } from '../log.ts'

/** KV bulk reads take at most this many keys. */
const KV_BULK_LIMIT = 100

/**
 * Which keys KV marks as processed. KV is only a fast path: when it fails,
 * every key counts as unmarked and D1 decides.
 */
export async function readKvMarks(kv: KVNamespace, keys: readonly string[], log: Logger): Promise<Set<string>> {
  const marked = new Set<string>()
  try {
    for (let start = 0; start < keys.length; start += KV_BULK_LIMIT) {
      const values = await kv.get(keys.slice(start, start + KV_BULK_LIMIT), 'text')
      for (const [key, value] of values) if (value !== null) marked.add(key)
    }
  } catch (error) {
    log.warn('idempotency.kv-read-failed', { count: keys.length, error })
    marked.clear()
  }
  return marked
}

/** Marks keys as processed in KV after their D1 commit; a failure only costs the fast path. */
export async function writeKvMarks(kv: KVNamespace, keys: readonly string[], ttlDays: number, log: Logger) {
  const results = await Promise.allSettled(keys.map((key) => kv.put(key, '1', { expirationTtl: ttlDays * 86_400 })))
  const failed = results.filter((result) => result.status === 'rejected').length
  if (failed > 0) log.warn('idempotency.kv-write-failed', { failed, count: keys.length })
}
