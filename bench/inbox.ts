/**
 * `npm run bench` (BENCH_ONLY=inbox): 1,000 idle in-app sockets on this
 * machine, one per recipient (each its own Durable Object), as 1,000 open
 * pages would hold them:
 *
 * - **memory**: workerd's resident set (every workerd process of the local
 *   Worker, from /proc) before the sockets, and with all of them open and
 *   idle after IDLE_SECONDS — the difference per socket. Locally one workerd
 *   holds every object, so this is what 1,000 feeds with a socket each take
 *   in one runtime; Cloudflare spreads objects over its machines and bills
 *   duration only while an object is awake (docs/inbox.md).
 * - **delivery**: one response.created per recipient through the whole
 *   pipeline (ingest, materialize, dispatch, the feed's object), with the
 *   in-app channel on; the time from the first ingest request until every
 *   socket was pushed its item, and each socket's time from the request that
 *   carried its event (median, 95th percentile).
 */
import { readdirSync, readFileSync } from 'node:fs'
import { inboxToken } from '../support/inbox-host.ts'
import { startLocalWorker } from '../support/local-worker.ts'
import { waitFor } from '../support/wait.ts'
import { percentile, progress, results, SCALE } from './lib.ts'
import { BENCH_TOKEN_VARIABLES, BENCH_TOKENS, pipelineAt, responseEvent } from './pipeline.ts'

const SOCKETS = Math.round(1000 * SCALE)
/** How long the sockets stay idle before workerd's memory is read: long enough for the objects to settle. */
const IDLE_SECONDS = 15
const SECRET = 'bench-inbox-token-secret-0123456789abcdef'
/** Events per ingest request. */
const BATCH = 100

/** Resident set of the processes named `comm` in a process group, in MB (VmRSS from /proc). */
function rssMbOfGroup(group: number, comm: string): number {
  let kb = 0
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (name !== comm || Number(fields[2]) !== group) continue
      kb += Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${entry}/status`, 'utf8'))?.[1] ?? '0')
    } catch {
      // gone meanwhile
    }
  }
  return Math.round(kb / 1024)
}

/** What one run of sockets measured. */
type Measured = {
  rssBefore: number
  rssIdle: number
  openMs: number
  allMs: number
  each: number[]
}

/**
 * Opens a socket for each of `socketsOf` (a user each, or one user many
 * times), lets them idle, then sends one response.created to each distinct
 * user and waits until every socket was pushed its user's item.
 */
async function measure(socketsOf: string[]): Promise<Measured> {
  const local = await startLocalWorker({ ...BENCH_TOKEN_VARIABLES, INBOX_TOKEN_SECRET: SECRET, LOG_LEVEL: 'warn' })
  const sockets: WebSocket[] = []
  try {
    await local.query("UPDATE channel_policies SET enabled = 1 WHERE kind = 'ResponseCreated' AND channel = 'in-app'")
    const rss = () => rssMbOfGroup(local.processGroup, 'workerd')
    const pushedAt = new Map<WebSocket, number>()
    const owners = new Map<WebSocket, string>()
    const open = (user: string) =>
      new Promise<void>((resolve, reject) => {
        const socket = new WebSocket(`${local.url.replace(/^http/, 'ws')}/v1/inbox/socket`, [
          'notify-edge.inbox',
          `bearer.${inboxToken(user, SECRET)}`,
        ])
        sockets.push(socket)
        owners.set(socket, user)
        socket.addEventListener('error', () => reject(new Error(`a socket of ${user} failed`)))
        socket.addEventListener('message', (event) => {
          const message = JSON.parse(String(event.data)) as { type: string }
          if (message.type === 'state') resolve()
          if (message.type === 'added') pushedAt.set(socket, performance.now())
        })
      })
    // One socket opened and closed first, so that the code every object runs is loaded before the baseline.
    await open(crypto.randomUUID())
    sockets.pop()?.close()
    const rssBefore = rss()
    const openStart = performance.now()
    for (let from = 0; from < socketsOf.length; from += 50)
      await Promise.all(socketsOf.slice(from, from + 50).map(open))
    const openMs = performance.now() - openStart
    // A bench reads memory after a set idle time; nothing here is asserted.
    await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000))
    const rssIdle = rss()

    const worker = pipelineAt(local.url, BENCH_TOKENS)
    const users = [...new Set(socketsOf)]
    const postedAt = new Map<string, number>()
    const start = performance.now()
    for (let from = 0; from < users.length; from += BATCH) {
      const chunk = users.slice(from, from + BATCH)
      const at = performance.now()
      await worker.post(chunk.map((user) => responseEvent(user).inbound))
      for (const user of chunk) postedAt.set(user, at)
    }
    await waitFor(
      () => (pushedAt.size === sockets.length ? true : undefined),
      `${sockets.length} sockets pushed their item`,
      600_000,
    )
    const allMs = performance.now() - start
    const each = sockets.map(
      (socket) => (pushedAt.get(socket) as number) - (postedAt.get(owners.get(socket) as string) as number),
    )
    return { rssBefore, rssIdle, openMs, allMs, each }
  } finally {
    for (const socket of sockets) socket.close()
    await local.stop()
  }
}

/** The row of one run, for results.inbox. */
function reported(measured: Measured): Record<string, number> {
  return {
    workerd_rss_mb_before: measured.rssBefore,
    workerd_rss_mb_with_idle_sockets: measured.rssIdle,
    rss_kb_per_idle_socket: Math.round(((measured.rssIdle - measured.rssBefore) * 1024) / SOCKETS),
    sockets_open_ms: Math.round(measured.openMs),
    deliver_to_all_ms: Math.round(measured.allMs),
    deliver_p50_ms: Math.round(percentile(measured.each, 50)),
    deliver_p95_ms: Math.round(percentile(measured.each, 95)),
  }
}

export async function benchInbox(): Promise<void> {
  progress(`inbox: ${SOCKETS} idle sockets of one recipient (tabs); then one item pushed to all`)
  const user = crypto.randomUUID()
  const oneFeed = reported(await measure(Array.from({ length: SOCKETS }, () => user)))
  progress(`inbox: ${SOCKETS} idle sockets, one per recipient; then one item to each through the pipeline`)
  const feeds = reported(await measure(Array.from({ length: SOCKETS }, () => crypto.randomUUID())))
  results.inbox = { sockets: SOCKETS, one_feed: oneFeed, a_feed_each: feeds }
  progress(`inbox: ${JSON.stringify(results.inbox)}`)
}
