import { ApiAnswerError, type Client } from './client.ts'

/** How many times a call that failed without an answer (the network, a 5xx) is made again before giving up. */
const TRIES = 5

/** The longest a call waits on the Worker's `Retry-After` (the hold settling: 16 minutes) before giving up. */
const LONGEST_WAIT_SECONDS = 20 * 60

type Answer = { cursor: string | null; at: string | null; copied: Record<string, number> }

/**
 * `notify-edge shards grow --to N`: POST /v1/shards/grow until the grow is
 * over, following its cursor. A call that fails without a 4xx is made again
 * with the same cursor (the route allows it: a page copied twice is copied
 * once); one answered with `Retry-After` (the hold settling) waits that long
 * and asks again. The rows copied are added up by table.
 */
export async function growShards(
  api: Client,
  to: number,
  limit: number,
  progress: (line: string) => void,
): Promise<{ calls: number; copied: Record<string, number> }> {
  const copied: Record<string, number> = {}
  let cursor: string | undefined
  let calls = 0
  for (;;) {
    const answer = await again(
      () => api.post('/v1/shards/grow', { to, limit, ...(cursor ? { cursor } : {}) }),
      progress,
    )
    calls += 1
    for (const [table, n] of Object.entries(answer.copied)) copied[table] = (copied[table] ?? 0) + n
    if (answer.cursor === null) return { calls, copied }
    if (calls % 50 === 0 || answer.at === 'finish') progress(`${calls} calls; next: ${answer.at}`)
    cursor = answer.cursor
  }
}

async function again(call: () => Promise<unknown>, progress: (line: string) => void): Promise<Answer> {
  let waited = 0
  for (let attempt = 1; ; attempt += 1) {
    try {
      return (await call()) as Answer
    } catch (error) {
      const wait = error instanceof ApiAnswerError ? error.retryAfter : undefined
      if (wait !== undefined && waited + wait <= LONGEST_WAIT_SECONDS) {
        progress(error instanceof Error ? error.message : String(error))
        waited += wait
        await sleep(wait * 1000)
        continue
      }
      // A refusal (4xx: no hold, a bad cursor, a shard not empty) is final; anything else may pass.
      const status = error instanceof ApiAnswerError ? error.status : 0
      if ((status >= 400 && status < 500) || attempt >= TRIES) throw error
      await sleep(1000 * attempt)
    }
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
