/**
 * `npm run bench`: emails/s through the resend transport at Resend's default
 * rate limit beside the same pipeline with no limit (issue 22: ≥ 90 %), both
 * against the provider fake (support/provider-fake.ts) with no faults.
 */
import { PACE_MAX_REQUESTS_PER_SECOND } from '../src/config.ts'
import { type LocalWorker, startLocalWorker } from '../support/local-worker.ts'
import { type ProviderStats, startProviderFake } from '../support/provider-fake.ts'
import { RESEND_DEFAULT_REQUESTS_PER_SECOND } from '../support/resend-rate.ts'
import { N, progress, ratio, results } from './lib.ts'
import { BENCH_TOKEN_VARIABLES, BENCH_TOKENS, benchEvent, ingestRate, pipelineAt } from './pipeline.ts'

const API_KEY = 'bench-resend-key'
/** A team limit the fake never reaches in a run: no rate limit at all. */
const UNLIMITED_REQUESTS_PER_SECOND = 100_000

/** What one run measured: its rate, and what the fake saw. */
type ResendRun = {
  emailsPerSecond: number
  stats: ProviderStats
  /** Emails the fake accepted (one per Idempotency-Key, a batch's members each). */
  emails: number
  /** Sends (one email, or one batch) the Worker put back on the queue: the pace had no slot for them within their wait. */
  pacedBack: number
  /** Milliseconds from the first event posted until every email was counted sent. */
  durationMs: number
  /** When each request reached the fake, in ms from the first event posted. */
  arrivals: number[]
}

/**
 * How long the run would have taken had its requests been held to `perSecond`
 * exactly, each as soon as it was ready and the rate allowed: the unlimited
 * run's requests, as the pipeline made them ready, spaced at least a
 * 1/perSecond apart. The ratio of the unlimited run's duration to that is the
 * most any pace could reach at that rate beside the unlimited run (when the
 * pipeline makes requests ready faster than the rate, the rate alone keeps
 * the limited run behind).
 */
function bestAtRate(run: ResendRun, perSecond: number): number {
  let last = Number.NEGATIVE_INFINITY
  for (const at of run.arrivals) last = Math.max(at, last + 1000 / perSecond)
  return run.durationMs + Math.max(0, last - (run.arrivals.at(-1) ?? 0))
}

/** The most requests in any five seconds of a run, a second's worth: the rate its pace reached when a backlog waited. */
function peakRequestsPerSecond(run: ResendRun): number {
  let most = 0
  for (let first = 0, i = 0; i < run.arrivals.length; i += 1) {
    while ((run.arrivals[i] as number) - (run.arrivals[first] as number) >= 5000) first += 1
    most = Math.max(most, i - first + 1)
  }
  return Math.round((most / 5) * 100) / 100
}

/**
 * N.resend events through a fresh Worker (fresh local state) whose resend
 * transport points at a fresh fake with the team limit `fakePerSecond`; the
 * Worker paces to `workerPerSecond`, or to its own default when undefined.
 */
async function resendRun(fakePerSecond: number, workerPerSecond: number | undefined): Promise<ResendRun> {
  const provider = await startProviderFake({
    failureRate: 0,
    rateLimitRate: 0,
    apiKey: API_KEY,
    requestsPerSecond: fakePerSecond,
  })
  let local: LocalWorker | undefined
  try {
    local = await startLocalWorker({
      ...BENCH_TOKEN_VARIABLES,
      // The paced-back count is read from the Worker's info lines.
      LOG_LEVEL: 'info',
      EMAIL_TRANSPORT: 'resend',
      RESEND_API_KEY: API_KEY,
      RESEND_API_URL: provider.url,
      ...(workerPerSecond === undefined ? {} : { RESEND_REQUESTS_PER_SECOND: String(workerPerSecond) }),
    })
    const startedAt = Date.now()
    const emailsPerSecond = await ingestRate(
      pipelineAt(local.url, BENCH_TOKENS),
      Array.from({ length: N.resend }, () => benchEvent()),
    )
    return {
      emailsPerSecond,
      stats: { ...provider.stats },
      emails: provider.emails.size,
      pacedBack: local.output().match(/"event":"notification\.paced"/g)?.length ?? 0,
      durationMs: Date.now() - startedAt,
      arrivals: provider.arrivals.map((at) => at - startedAt),
    }
  } finally {
    await local?.stop()
    provider.close()
  }
}

/** The keys of one run under `results.worker_pipeline`, each prefixed with the run's name. */
function runKeys(name: string, run: ResendRun): Record<string, number> {
  return {
    [`${name}_emails_per_s`]: run.emailsPerSecond,
    [`${name}_requests`]: run.stats.requests,
    [`${name}_batch_requests`]: run.stats.batchRequests,
    [`${name}_emails_per_request`]: Math.round((run.emails / run.stats.requests) * 10) / 10,
    [`${name}_over_rate`]: run.stats.overRate,
    [`${name}_rate_limited`]: run.stats.rateLimited,
    [`${name}_paced_back`]: run.pacedBack,
    [`${name}_peak_requests_per_s_over_5s`]: peakRequestsPerSecond(run),
  }
}

/**
 * The Worker pipeline through resend with no rate limit — the fake's team
 * limit out of reach, the Worker's pace at its ceiling — and at Resend's
 * default of 5 requests/s with the Worker's pace at its default (also 5): the
 * same events each, each in a Worker of its own. Merged into
 * `results.worker_pipeline` beside what benchWorker measured.
 */
export async function benchResendRate(): Promise<void> {
  progress(`worker_pipeline: ${N.resend} events through resend with no rate limit`)
  const unlimited = await resendRun(UNLIMITED_REQUESTS_PER_SECOND, PACE_MAX_REQUESTS_PER_SECOND)
  progress(`worker_pipeline: ${N.resend} events through resend at ${RESEND_DEFAULT_REQUESTS_PER_SECOND} requests/s`)
  const limited = await resendRun(RESEND_DEFAULT_REQUESTS_PER_SECOND, undefined)
  results.worker_pipeline = {
    ...results.worker_pipeline,
    ...runKeys('resend_unlimited', unlimited),
    ...runKeys('resend_rate_limited', limited),
    of_resend_unlimited: ratio(
      `resend at ${RESEND_DEFAULT_REQUESTS_PER_SECOND} requests/s / resend unlimited`,
      limited.emailsPerSecond,
      unlimited.emailsPerSecond,
      90,
    ),
    // What Resend's rate allows beside this unlimited run: the ceiling of the ratio above on this machine.
    resend_at_rate_best_possible_of_unlimited: `${Math.round(
      (unlimited.durationMs / bestAtRate(unlimited, RESEND_DEFAULT_REQUESTS_PER_SECOND)) * 100,
    )}%`,
  }
}
