/**
 * Health at the top of every console page: each configured transport that
 * cannot send — paused (what paused it) or its circuit open (why) — with
 * when it is tried next and whether mail goes through another meanwhile or
 * how many notifications wait, and the doctor's blockers and
 * warnings — the rules of `GET /v1/health/config` and `npx notify-edge
 * doctor`, with Resend's word on the sender's domain reused for a minute
 * (src/health/remembered.ts) so a page view does not wait on Resend. The
 * overview lists each finding with its fix, and each transport's state with
 * its share of the last hour's mail; the other pages carry one line
 * that links there. A viewer sees how many findings there are, not what they are:
 * findings tell which secrets are set, and the route that lists them is an
 * admin's.
 */
import type { Operator } from '../audit/operator.ts'
import { rowsEverywhere } from '../d1/shards.ts'
import { describeWorker } from '../health/describe.ts'
import { type Finding, findingsOf } from '../health/findings.ts'
import { carrierOf, type Provider } from '../health/providers.ts'
import { providersOfDeployment } from '../health/transport.ts'
import type { Deployment } from '../health/types.ts'
import { cappedStatusCounts } from './counts.ts'
import { cappedCount } from './format.ts'
import { TextWithTimes, Time } from './time.tsx'

/** What every page shows at its top. */
export type PageHealth = {
  /** Each configured transport in order, with its state and pause; undefined when they could not be read. */
  providers?: Provider[]
  /** How many notifications wait `paused` (capped): counted only while no transport can send. */
  waiting?: number
  /** The doctor's findings, every severity; undefined when they could not be made. */
  findings?: Finding[]
}

/**
 * A page's health, read once per page view: the doctor's description of
 * this Worker (its transports' pauses and its cron in one D1 batch, Resend's answer reused for
 * a minute), its findings, each transport's state from those pauses, and —
 * only while no transport can send — how many notifications wait (capped).
 * The pauses are the description's: not read a second time. Findings are
 * left out if describing failed.
 */
export async function healthOf(env: Env, now = new Date()): Promise<PageHealth> {
  let deployment: Deployment
  try {
    deployment = await describeWorker(env, now, { recall: true })
  } catch {
    return {}
  }
  const findings = findingsOf(deployment)
  const providers = providersOfDeployment(deployment)
  if (!providers || carrierOf(providers)) return { findings, providers }
  // Every D1 shard pauses on its own, each with its waiting notifications: counted together.
  const [rows = []] = await rowsEverywhere(env, (db) => [cappedStatusCounts(db, ['paused'])])
  return { findings, providers, waiting: rows.reduce((sum, row) => sum + Number(row.n ?? 0), 0) }
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
 * The top of a page: each transport that cannot send, and a line for the findings — unless the
 * page lists them itself (`listed`, the overview). Nothing when all is well.
 */
export function HealthBanner(props: { health: PageHealth; operator?: Operator; listed?: boolean }) {
  const { health, operator, listed } = props
  const providers = health.providers ?? []
  const carrier = carrierOf(providers)
  return (
    <>
      {providers.map((provider) =>
        provider.pause ? <PausedBanner provider={provider} carrier={carrier} waiting={health.waiting ?? 0} /> : null,
      )}
      {health.findings && operator && !listed ? <FindingsLine findings={health.findings} operator={operator} /> : null}
    </>
  )
}

/**
 * The banner of a transport that cannot send: paused (its code) or its
 * circuit open (why), since when, and when it is tried next; red while no
 * transport can send, with how many notifications wait, and a note while
 * mail goes through `carrier` meanwhile.
 */
function PausedBanner(props: { provider: Provider; carrier: string | undefined; waiting: number }) {
  const { provider, carrier, waiting } = props
  const { transport, pause } = provider
  if (!pause) return null
  const open = provider.state === 'circuit-open'
  const meanwhile = carrier ? (
    <>mail goes through {carrier} meanwhile.</>
  ) : (
    <>{cappedCount(waiting)} notification(s) wait, none is lost.</>
  )
  return (
    <div class={carrier ? 'note' : 'error'} role={carrier ? 'status' : 'alert'} data-transport={transport}>
      {open ? (
        <>
          <strong>The {transport} transport's circuit is open</strong> since <Time at={pause.since} relative />:{' '}
          {pause.reason}; {meanwhile} The next single try is due <Time at={pause.probe_at} relative />; it closes by
          itself once the provider answers (docs/operating.md, "Provider failover").
        </>
      ) : (
        <>
          <strong>The {transport} transport is paused</strong> since <Time at={pause.since} relative /> ({pause.code}):{' '}
          {meanwhile} The next single try is due <Time at={pause.probe_at} relative />; it resumes by itself once the
          provider accepts. Fix the configuration the code names (docs/operating.md, "A paused transport").
        </>
      )}
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
