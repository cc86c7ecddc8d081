/**
 * `npm run bench` (BENCH_ONLY=largest): the CPU of the largest single pieces
 * of work the pipeline allows, against Cloudflare's CPU limit per invocation
 * (30 s by default, docs/deploy.md):
 *
 * - **a digest of 500 closing**: 500 `response.created` events to one owner
 *   join one digest; the CPU is measured from when all 500 are in until its
 *   email is sent — the close (members read, the digest rendered) and the send.
 * - **a bulk replay of 1,000 dead letters**: 1,000 events that break their
 *   contract become dead letters; one `POST /v1/dead-letters/replay` with
 *   `max: 1000` puts them back on notify-events. The CPU is measured over
 *   that request.
 *
 * Each is workerd's whole CPU over the span (`cpuMsOfGroup`): local D1 and
 * Queues run in the same process, and a consumer that starts meanwhile (the
 * replayed events are consumed at once) is counted too, so each figure is an
 * upper bound of the invocation's own. workerd's CPU while idle over the same
 * span is measured first and reported beside it.
 */
import { INGEST_MAX_EVENTS } from '@notify-edge/contracts'
import { startLocalWorker } from '../support/local-worker.ts'
import { waitFor } from '../support/wait.ts'
import { cpuMsOfGroup, progress, results } from './lib.ts'
import {
  BENCH_TOKEN_VARIABLES,
  BENCH_TOKENS,
  type BenchEvent,
  benchEvent,
  pipelineAt,
  responseEvent,
} from './pipeline.ts'

const DIGEST_MEMBERS = 500
const DEAD_LETTERS = 1000
/** Long enough to post 500 events to the digest before it closes, short enough to wait for. */
const WINDOW_SECONDS = 20

/** An invitation whose recipient has no email: it breaks its contract and becomes a dead letter at once. */
function brokenEvent(): BenchEvent {
  const event = benchEvent()
  const value = JSON.parse(event.inbound.body) as { data: { recipient: Record<string, unknown> } }
  delete value.data.recipient.email
  return { ...event, inbound: { ...event.inbound, body: JSON.stringify(value) } }
}

export async function benchLargest(): Promise<void> {
  progress(`largest: a digest of ${DIGEST_MEMBERS} closing, a bulk replay of ${DEAD_LETTERS} dead letters`)
  const local = await startLocalWorker({
    ...BENCH_TOKEN_VARIABLES,
    LOG_LEVEL: 'info',
    DIGEST_WINDOW_SECONDS: String(WINDOW_SECONDS),
    SENT_MESSAGE_RETENTION_DAYS: '0',
  })
  const worker = pipelineAt(local.url, BENCH_TOKENS)
  const cpu = () => cpuMsOfGroup(local.processGroup, 'workerd')
  const count = async (sql: string) => Number((await local.query(sql))[0]?.n)
  try {
    // What workerd spends doing nothing, for as long as a digest's window runs out.
    const idleFrom = cpu()
    const idleStart = performance.now()
    await new Promise((resolve) => setTimeout(resolve, 5_000))
    const idleMsPerSecond = (cpu() - idleFrom) / ((performance.now() - idleStart) / 1000)

    const owner = crypto.randomUUID()
    const members = Array.from({ length: DIGEST_MEMBERS }, () => responseEvent(owner))
    const posted = performance.now()
    for (let at = 0; at < members.length; at += INGEST_MAX_EVENTS) {
      await worker.post(members.slice(at, at + INGEST_MAX_EVENTS).map((event) => event.inbound))
    }
    await waitFor(
      async () => ((await count('SELECT count(*) AS n FROM processed_marks')) >= DIGEST_MEMBERS ? true : undefined),
      'every member of the digest materialized',
      120_000,
    )
    const materializedIn = (performance.now() - posted) / 1000
    const digestFrom = cpu()
    const digestStart = performance.now()
    const [digest] = await waitFor(async () => {
      const rows = await local.query(
        "SELECT status, digest_size FROM notifications WHERE is_digest = 1 AND status IN ('sent', 'failed')",
      )
      return rows.length > 0 ? rows : undefined
    }, 'the digest sent')
    const digestCpu = cpu() - digestFrom
    const digestSeconds = (performance.now() - digestStart) / 1000

    const broken = Array.from({ length: DEAD_LETTERS }, brokenEvent)
    for (let at = 0; at < broken.length; at += INGEST_MAX_EVENTS) {
      await worker.post(broken.slice(at, at + INGEST_MAX_EVENTS).map((event) => event.inbound))
    }
    await waitFor(
      async () =>
        (await count("SELECT count(*) AS n FROM dead_letters WHERE status = 'open'")) >= DEAD_LETTERS
          ? true
          : undefined,
      'every dead letter stored',
      120_000,
    )
    const replayFrom = cpu()
    const replayStart = performance.now()
    const answer = await local.request('/v1/dead-letters/replay', {
      method: 'POST',
      headers: { authorization: `Bearer ${BENCH_TOKENS.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ max: DEAD_LETTERS }),
    })
    const replayCpu = cpu() - replayFrom
    const replaySeconds = (performance.now() - replayStart) / 1000
    const replayed = ((await answer.json()) as { replayed?: string[] }).replayed?.length ?? 0
    if (answer.status !== 200 || replayed !== DEAD_LETTERS) {
      throw new Error(`the bulk replay answered ${answer.status} with ${replayed} of ${DEAD_LETTERS} replayed`)
    }
    results.largest = {
      idle_cpu_ms_per_second: Math.round(idleMsPerSecond),
      digest_members: DIGEST_MEMBERS,
      digest_status: digest?.status,
      digest_size: digest?.digest_size,
      digest_materialized_in_seconds: Math.round(materializedIn * 10) / 10,
      digest_close_and_send_cpu_ms: Math.round(digestCpu),
      digest_close_and_send_seconds: Math.round(digestSeconds * 10) / 10,
      // Less what workerd spends idle over as long: most of the span is the window running out.
      digest_close_and_send_cpu_ms_less_idle: Math.round(digestCpu - idleMsPerSecond * digestSeconds),
      bulk_replay_dead_letters: replayed,
      bulk_replay_cpu_ms: Math.round(replayCpu),
      bulk_replay_seconds: Math.round(replaySeconds * 100) / 100,
    }
  } finally {
    await local.stop()
  }
}
