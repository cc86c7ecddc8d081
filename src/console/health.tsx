/**
 * Health at the top of every console page: a paused transport (what paused
 * it, how many wait, when it is tried next) and the doctor's blockers and
 * warnings — the rules of `GET /v1/health/config` and `npx notify-edge
 * doctor`, with Resend's word on the sender's domain reused for a minute
 * (src/health/remembered.ts) so a page view does not wait on Resend. The
 * overview lists each finding with its fix; the other pages carry one line
 * that links there. A viewer sees how many there are, not what they are:
 * findings tell which secrets are set, and the route that lists them is an
 * admin's.
 */
import type { Operator } from '../audit/operator.ts'
import { rowsEverywhere } from '../d1/shards.ts'
import { describeWorker } from '../health/describe.ts'
import { type Finding, findingsOf } from '../health/findings.ts'
import type { Deployment } from '../health/types.ts'
import { cappedStatusCounts } from './counts.ts'
import { cappedCount } from './format.ts'
import { TextWithTimes, Time } from './time.tsx'

/** The configured transport's pause with the count of notifications it holds. */
export type Paused = { transport: string; code: string; since: string; probeAt: string; waiting: number }

/** What every page shows at its top. */
export type PageHealth = {
  paused?: Paused
  /** The doctor's findings, every severity; undefined when they could not be made. */
  findings?: Finding[]
}

/**
 * A page's health, read once per page view: the doctor's description of
 * this Worker (its pause and cron in one D1 batch, Resend's answer reused for
 * a minute), its findings, and — only while the transport is paused — how
 * many notifications wait for it (capped). The pause is the description's:
 * not read a second time. Findings are left out if describing failed.
 */
export async function healthOf(env: Env, now = new Date()): Promise<PageHealth> {
  let deployment: Deployment
  try {
    deployment = await describeWorker(env, now, { recall: true })
  } catch {
    return {}
  }
  const findings = findingsOf(deployment)
  const pause = deployment.pause
  if (!pause) return { findings }
  // Every D1 shard pauses on its own, each with its waiting notifications: counted together.
  const [rows = []] = await rowsEverywhere(env, (db) => [cappedStatusCounts(db, ['paused'])])
  const counted = { n: rows.reduce((sum, row) => sum + Number(row.n ?? 0), 0) }
  return {
    findings,
    paused: {
      transport: pause.transport,
      code: pause.code,
      since: pause.since,
      probeAt: pause.probe_at,
      waiting: Number(counted?.n ?? 0),
    },
  }
}

const plural = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`

/** How many blockers and warnings, as words. */
function tally(findings: readonly Finding[]): { blockers: number; shown: Finding[]; words: string } {
  const shown = findings.filter((finding) => finding.severity !== 'info')
  const blockers = shown.filter((finding) => finding.severity === 'blocker').length
  const words = `${plural(blockers, 'blocker', 'blockers')}, ${plural(shown.length - blockers, 'warning', 'warnings')}`
  return { blockers, shown, words }
}

/**
 * The top of a page: the pause, and a line for the findings — unless the
 * page lists them itself (`listed`, the overview). Nothing when all is well.
 */
export function HealthBanner(props: { health: PageHealth; operator?: Operator; listed?: boolean }) {
  const { health, operator, listed } = props
  return (
    <>
      {health.paused ? <PausedBanner paused={health.paused} /> : null}
      {health.findings && operator && !listed ? <FindingsLine findings={health.findings} operator={operator} /> : null}
    </>
  )
}

/** The banner of a paused transport: what paused it, since when, how many wait, when it is tried next. */
function PausedBanner(props: { paused: Paused }) {
  const { transport, code, since, probeAt, waiting } = props.paused
  return (
    <div class="error" role="alert">
      <strong>The {transport} transport is paused</strong> since <Time at={since} relative /> ({code}):{' '}
      {cappedCount(waiting)} notification(s) wait, none is lost. The next single try is due{' '}
      <Time at={probeAt} relative />; it resumes by itself once the provider accepts. Fix the configuration the code
      names (docs/operating.md, "A paused transport").
    </div>
  )
}

/** One line for the findings on a page other than the overview: how many, which, and where their fixes are. */
function FindingsLine(props: { findings: Finding[]; operator: Operator }) {
  const { blockers, shown, words } = tally(props.findings)
  if (shown.length === 0) return null
  const admin = props.operator.role === 'admin'
  return (
    <p id="health" class={blockers > 0 ? 'error' : 'note'}>
      <strong>Configuration: {words}</strong>
      {admin ? (
        <>
          {' '}
          ({shown.map((finding, index) => [index > 0 ? ', ' : '', <code>{finding.id}</code>])}):{' '}
          <a href="/console#findings">what fixes each</a>.
        </>
      ) : (
        '. An admin sees each with its fix on the overview.'
      )}
    </p>
  )
}

/**
 * The overview's list: each blocker and warning with its fix (an admin), or
 * how many there are (a viewer); a line for the rest.
 */
export function FindingsPanel(props: { findings: Finding[] | undefined; operator: Operator }) {
  const { findings, operator } = props
  if (!findings) return null
  const { blockers, shown, words } = tally(findings)
  const info = findings.length - shown.length
  if (shown.length === 0) {
    return (
      <p id="findings" class="ok" role="status">
        Configuration: nothing stands between this deployment and a delivered email
        {info > 0 ? ` (${info} notes: npx notify-edge doctor)` : ''}.
      </p>
    )
  }
  if (operator.role !== 'admin') {
    return (
      <p id="health" class={blockers > 0 ? 'error' : 'note'}>
        <strong>Configuration: {words}</strong>. An admin sees each with its fix here.
      </p>
    )
  }
  return (
    <section id="findings" class={blockers > 0 ? 'error' : 'note'} aria-labelledby="findings-title">
      <h2 id="findings-title">Configuration: {words}</h2>
      <ul>
        {shown.map((finding) => (
          <li data-finding={finding.id}>
            <strong>{finding.severity}</strong> <code>{finding.id}</code>: <TextWithTimes text={finding.message} />
            <br />
            Fix: <code>{finding.fix}</code>
          </li>
        ))}
      </ul>
      {info > 0 ? <p>{info} more notes: npx notify-edge doctor.</p> : null}
    </section>
  )
}
