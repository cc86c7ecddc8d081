/**
 * What every bench module shares: the message counts, the results it fills,
 * rates and percentiles, the goal beside each ratio, and what /proc says about
 * CPU and memory.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { waitFor } from '../support/wait.ts'

/** BENCH_SCALE (default 1) multiplies every message count. */
export const SCALE = Number(process.env.BENCH_SCALE ?? '1')

/** `npm run bench -- --profile` or BENCH_PROFILE=1: a CPU profile of the Worker isolate (bench/profile.ts). */
export const PROFILE = process.argv.includes('--profile') || process.env.BENCH_PROFILE === '1'

export const N = {
  pg: 50_000 * SCALE,
  pgBaseline: 5_000 * SCALE,
  rabbit: 20_000 * SCALE,
  kafka: 50_000 * SCALE,
  worker: 1_000 * SCALE,
  // Five times the pipeline's: a run at 5 requests/s of 1,000 lasts a few seconds and twenty requests, too few to read.
  resend: 5_000 * SCALE,
  bareQueue: 5_000 * SCALE,
  bareSend: 1_000 * SCALE,
  e2e: 100,
  capacity: 1_000 * SCALE,
  shards: 1_000 * SCALE,
}

/** Everything measured, by bench, as bench/results.json holds it. */
export const results: Record<string, Record<string, unknown>> = {}

export const progress = (text: string) => process.stdout.write(`[bench] ${text}\n`)

export const rate = (count: number, ms: number) => Math.round((count / ms) * 1000)

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0)
}

/** One target of the run: what is measured against what, the goal, and whether this run met it. */
export type Goal = { name: string; value: string; goal: string; met: boolean }

/** Every goal the benches measured in this run, in order. */
export const goals: Goal[] = []

/** Records `value / base` against a goal in percent, and returns the "72% (goal ≥ 75%)" text. */
export function ratio(name: string, value: number, base: number, goalPercent: number): string {
  const percent = Math.round((value / base) * 100)
  const text = `${percent}% (goal ≥ ${goalPercent}%)`
  goals.push({ name, value: `${percent}%`, goal: `≥ ${goalPercent}%`, met: percent >= goalPercent })
  return text
}

/** Records a measured value against an upper budget. */
export function budget(name: string, value: number, limit: number, unit: string): void {
  goals.push({ name, value: `${value} ${unit}`, goal: `≤ ${limit} ${unit}`, met: value <= limit })
}

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100

/** CPU time (user + system, ms) of the processes named `comm` in a process group, read from /proc. */
export function cpuMsOfGroup(group: number, comm: string): number {
  let ticks = 0
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    let stat: string
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
    } catch {
      continue // gone meanwhile
    }
    // pid (comm) state ppid pgrp … utime(14) stime(15): comm may hold spaces, so split after ")".
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (name !== comm || Number(fields[2]) !== group) continue
    ticks += Number(fields[11]) + Number(fields[12])
  }
  return (ticks * 1000) / TICKS_PER_SECOND
}

/** Peak resident set size of a process (VmHWM), in MB. */
export function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = Number(/^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1] ?? '0')
  return Math.round(kb / 1024)
}

const peakRssByRelay: Record<string, number> = {}

/** Notes a relay's peak RSS (call it before stopping the bridge); the largest is `bridge.peak_rss_mb`. */
export function notePeakRss(relay: string, pid: number): void {
  peakRssByRelay[relay] = peakRssMb(pid)
  results.bridge = { peak_rss_mb: Math.max(...Object.values(peakRssByRelay)), peak_rss_mb_by_relay: peakRssByRelay }
}

/**
 * A relay's rate, timed from its first forwarded event (the baselines are timed
 * from a client already connected), until `finished` says all `total` went
 * through; then its peak RSS is noted under `relay`.
 */
export async function relayRate(
  relay: string,
  bridge: { child: { pid?: number | undefined } },
  sink: { accepted: unknown[] },
  total: number,
  finished: () => Promise<boolean> | boolean,
): Promise<number> {
  await waitFor(() => (sink.accepted.length > 0 ? true : undefined), `the first event of ${relay}`, 120_000)
  const start = performance.now()
  const first = sink.accepted.length
  await waitFor(async () => ((await finished()) ? true : undefined), relay, 600_000)
  const measured = rate(total - first, performance.now() - start)
  notePeakRss(relay, bridge.child.pid as number)
  return measured
}
