/**
 * `npm run bench -- --profile` (or BENCH_PROFILE=1): a V8 CPU profile of the
 * Worker isolate under `wrangler dev --inspector-port`, taken through the
 * DevTools protocol while the worker_pipeline bench runs.
 *
 * The approach comes from the team's tool `worker-cpu-profile.mjs` (checked
 * with wrangler 4.156 / workerd), which found two pitfalls:
 *  1. wrangler's inspector proxy refuses a WebSocket without an `Origin`
 *     header (400 "Expected `Origin` header"); Node 22's WebSocket (undici)
 *     takes one through its non-standard `headers` option.
 *  2. workerd serves inspector messages only while the isolate runs
 *     JavaScript: an idle Worker leaves Profiler.enable/start/stop
 *     unanswered. So while a command waits for its answer, a request to the
 *     Worker's /healthz goes out every 250 ms (only then: during the load the
 *     isolate is busy anyway, and a ticker would add its own CPU).
 */

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { SourceMap } from 'node:module'
import { join } from 'node:path'

/** A V8 CPU profile (`Profiler.stop`'s answer), as Chrome DevTools opens it. */
export type CpuProfile = {
  nodes: { id: number; callFrame: CallFrame; children?: number[] }[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

export type CallFrame = { functionName: string; url: string; lineNumber: number; columnNumber: number }

/**
 * Names a frame of the Worker's bundle by where it is in our sources:
 * `wrangler dev` bundles the Worker into `.wrangler/tmp/dev-…/index.js` with
 * a source map beside it, read while it still runs (it deletes its bundle
 * when it stops); the profile calls that file just `index.js`. Frames of
 * other files (workerd's own `cloudflare-internal:` modules) keep their file
 * and line.
 */
export function sourceMapped(): (frame: CallFrame) => string | undefined {
  let map: SourceMap | undefined
  try {
    const tmp = '.wrangler/tmp'
    const newest = readdirSync(tmp)
      .filter((name) => name.startsWith('dev-') && existsSync(join(tmp, name, 'index.js.map')))
      .map((name) => join(tmp, name, 'index.js.map'))
      .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0]
    if (newest) map = new SourceMap(JSON.parse(readFileSync(newest, 'utf8')))
  } catch {
    map = undefined // no bundle to read: frames keep the bundle's lines
  }
  return (frame) => {
    if (frame.url !== 'index.js') return undefined
    const entry = map?.findEntry(frame.lineNumber, frame.columnNumber)
    if (!entry || !('originalSource' in entry)) return undefined
    const source = entry.originalSource.replace(/^.*?\/(src|node_modules)\//, '$1/')
    return `${source}:${entry.originalLine + 1}`
  }
}

/** Microseconds between samples: fine enough for a pipeline whose events cost milliseconds. */
const SAMPLING_INTERVAL_US = 250
/** How often the isolate is woken while a command waits for its answer. */
const TICK_MS = 250
/** Wrangler's inspector proxy wants some Origin; DevTools' own is what it expects. */
const ORIGIN = 'https://devtools.devprod.cloudflare.dev'

/** A profile being recorded: `stop()` ends it and returns the profile. */
export type Recording = { stop: () => Promise<CpuProfile> }

/**
 * Connects to the inspector of a `wrangler dev` started with `inspectorPort`
 * and starts the profiler; `tickUrl` is fetched while each command waits.
 */
export async function startProfile(inspectorPort: number, tickUrl: string): Promise<Recording> {
  // Node's WebSocket is undici's, which accepts `headers`; the DOM typings know only `protocols`.
  const Socket = WebSocket as unknown as new (url: string, init: { headers: Record<string, string> }) => WebSocket
  const socket = new Socket(`ws://127.0.0.1:${inspectorPort}/ws`, { headers: { origin: ORIGIN } })
  const pending = new Map<number, (message: { result?: unknown }) => void>()
  let lastId = 0
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown }
    // The proxy answers some commands by echoing them (no `result`); any message with the id settles it.
    if (message.id !== undefined) {
      pending.get(message.id)?.(message)
      pending.delete(message.id)
    }
  })
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve, { once: true })
    socket.addEventListener('error', () => reject(new Error(`no inspector on port ${inspectorPort}`)), { once: true })
  })
  const call = async (method: string, params: Record<string, unknown> = {}) => {
    const ticker = setInterval(() => fetch(tickUrl).catch(() => {}), TICK_MS)
    try {
      lastId += 1
      const answer = new Promise<{ result?: unknown }>((resolve) => pending.set(lastId, resolve))
      socket.send(JSON.stringify({ id: lastId, method, params }))
      return await answer
    } finally {
      clearInterval(ticker)
    }
  }
  await call('Profiler.enable')
  await call('Profiler.setSamplingInterval', { interval: SAMPLING_INTERVAL_US })
  await call('Profiler.start')
  return {
    async stop() {
      const answer = (await call('Profiler.stop')) as { result?: { profile?: CpuProfile } }
      socket.close()
      if (!answer.result?.profile) throw new Error(`Profiler.stop answered ${JSON.stringify(answer).slice(0, 300)}`)
      return answer.result.profile
    },
  }
}

/**
 * How long the isolate ran during a profile, from its samples: each sample's
 * time delta counted to its state. `runMs` is every sample but `(idle)` (the
 * isolate waiting for I/O): JavaScript, the garbage collector and
 * `(program)`, the runtime's own code on the isolate's behalf (bindings,
 * serialisation). `programMs` is the `(program)` part alone, reported beside
 * it: it may also hold time the isolate's thread spent on other work of the
 * same workerd (local D1, Queues), which a deployment does not bill to the
 * Worker, so `runMs - programMs` is the lower bound of what it pays.
 */
export function isolateTime(profile: CpuProfile): { runMs: number; programMs: number; samples: number } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node.callFrame.functionName]))
  let run = 0
  let program = 0
  let samples = 0
  profile.samples.forEach((id, index) => {
    const name = byId.get(id)
    if (name === '(idle)') return
    const delta = profile.timeDeltas[index] ?? 0
    run += delta
    samples += 1
    if (name === '(program)') program += delta
  })
  return { runMs: run / 1000, programMs: program / 1000, samples }
}

/** One function of a profile: its share of the samples, on its own (self) and with what it called (inclusive). */
export type ProfileEntry = { fn: string; selfPercent: number; inclusivePercent: number }

const round1 = (value: number) => Math.round(value * 10) / 10

/**
 * The functions of a profile by self and by inclusive time, `top` of each. A
 * function is named `name (file:line)`; inclusive time counts a sample once
 * per function even when it recurses (`(root)`, in every sample, is left
 * out). `(idle)` samples (the isolate waiting)
 * are left out, so the shares are of the time the isolate ran.
 */
export function summarise(
  profile: CpuProfile,
  where: (frame: CallFrame) => string | undefined = () => undefined,
  top = 15,
): { bySelf: ProfileEntry[]; byInclusive: ProfileEntry[] } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parentOf = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id)
  const nameOf = (frame: CallFrame) => {
    const file = frame.url.slice(frame.url.lastIndexOf('/') + 1)
    const place = where(frame) ?? (file ? `${file}:${frame.lineNumber + 1}` : '')
    return `${frame.functionName || '(anonymous)'}${place ? ` (${place})` : ''}`
  }
  const self = new Map<string, number>()
  const inclusive = new Map<string, number>()
  const stackOf = new Map<number, Set<string>>()
  const stack = (id: number): Set<string> => {
    let names = stackOf.get(id)
    if (!names) {
      const parent = parentOf.get(id)
      names = new Set(parent === undefined ? [] : stack(parent))
      names.add(nameOf((byId.get(id) as CpuProfile['nodes'][number]).callFrame))
      stackOf.set(id, names)
    }
    return names
  }
  let total = 0
  profile.samples.forEach((id, index) => {
    const node = byId.get(id)
    if (!node || node.callFrame.functionName === '(idle)') return
    const delta = profile.timeDeltas[index] ?? 0
    total += delta
    const name = nameOf(node.callFrame)
    self.set(name, (self.get(name) ?? 0) + delta)
    for (const fn of stack(id)) if (fn !== '(root)') inclusive.set(fn, (inclusive.get(fn) ?? 0) + delta)
  })
  const entry = (fn: string): ProfileEntry => ({
    fn,
    selfPercent: round1(((self.get(fn) ?? 0) / total) * 100),
    inclusivePercent: round1(((inclusive.get(fn) ?? 0) / total) * 100),
  })
  const ranked = (times: Map<string, number>) =>
    [...times]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([fn]) => entry(fn))
  return { bySelf: ranked(self), byInclusive: ranked(inclusive) }
}
