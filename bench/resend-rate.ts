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
    const emailsPerSecond = await ingestRate(
      pipelineAt(local.url, BENCH_TOKENS),
      Array.from({ length: N.resend }, () => benchEvent()),
    )
    return {
      emailsPerSecond,
      stats: { ...provider.stats },
      emails: provider.emails.size,
      pacedBack: local.output().match(/"event":"notification\.paced"/g)?.length ?? 0,
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
  }
}
