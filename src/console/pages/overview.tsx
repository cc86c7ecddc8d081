import { byColumns, rowsEverywhere, sumRows } from '../../d1/shards.ts'
/**
 * The overview: for an admin, what stands between the deployment and a
 * delivered email (the doctor's findings); each email transport's state and
 * its share of the last hour's mail; what waits for an operator (open
 * dead letters by code and queue), what waits now and what the last 24 hours'
 * notifications ended as (by status), digests by kind, how far behind each source is, how full the
 * database is, and the latest failures — each number of a list a link to it.
 * Then the pipeline's activity, per minute for the last hour and per hour for
 * the last 7 days, and the delivery, bounce and complaint rates beside the
 * published limits, all from the counters' time buckets.
 */
import { carrierOf, type Provider } from '../../health/providers.ts'
import { sentLastHour } from '../../health/transport-reads.ts'
import { type BucketRow, bucketReads } from '../../metrics/buckets.ts'
import { D1_SIZE_LIMIT_BYTES, GAUGES } from '../../metrics/counters.ts'
import { WAITING_STATUSES } from '../../notifications/status.ts'
import { ActivityCharts } from '../charts/activity.tsx'
import { activityOf, type Outcome, totalsByKind } from '../charts/activity-data.ts'
import type { ConsoleContext } from '../context.ts'
import { cappedStatusCounts } from '../counts.ts'
import { cappedCount, duration, NOT_A_VALUE } from '../format.ts'
import { FindingsPanel } from '../health.tsx'
import { Layout, queryOf, Table } from '../layout.tsx'
import { RatesCard } from '../rates/rates-card.tsx'
import { RefreshControl, refreshSeconds } from '../refresh.tsx'
import { Time } from '../time.tsx'
import { DigestsCard, digestCounts } from './digests.tsx'

type Row = Record<string, string | number | null>

/** What the overview reads, by the part of the page that shows it. */
type OverviewPart = 'open' | 'waiting' | 'lag' | 'latest' | 'size' | 'digests' | 'minutes' | 'hours' | 'live' | 'sent'

/**
 * The overview's reads, in one D1 batch: six for the cards, three of the
 * buckets for the charts, rates and the last day's outcomes, and the last
 * hour's sends by transport. None reads notifications beyond the capped
 * counts of what waits and the hour's entries of the index of sent emails.
 */
async function overviewData(env: Env, now: Date): Promise<Record<OverviewPart, Row[]>> {
  // With D1 shards, each shard's rows, merged as one database would have answered (src/d1/shards.ts).
  const [
    open = [],
    waiting = [],
    lag = [],
    latest = [],
    size = [],
    digests = [],
    minutes = [],
    hours = [],
    live = [],
    sent = [],
  ] = (await rowsEverywhere(env, (db) => [
    db.prepare(
      `SELECT code, queue, count(*) AS n FROM dead_letters WHERE status = 'open'
         GROUP BY code, queue ORDER BY n DESC, code`,
    ),
    cappedStatusCounts(db, WAITING_STATUSES),
    db.prepare(
      // The largest of a source's rows (each shard of notify-events past the first keeps its own), with
      // that row's time: SQLite takes a bare column from the row max() chose.
      `SELECT json_extract(labels, '$.source') AS source, max(value) AS value, updated_at
         FROM gauges WHERE name = 'notify_consumer_lag_seconds' GROUP BY source ORDER BY source`,
    ),
    db.prepare(
      `SELECT id, code, queue, event_id, last_seen, error FROM dead_letters ORDER BY last_seen DESC, id LIMIT 10`,
    ),
    db.prepare('SELECT value, updated_at FROM gauges WHERE name = ?1').bind(GAUGES.d1Size),
    digestCounts(db),
    ...bucketReads(db, now),
    sentLastHour(db, now),
  ])) as Row[][]
  const largest = (rows: Row[], key: string) =>
    [...Map.groupBy(rows, (row) => String(row[key]))].map(
      ([, group]) => group.reduce((a, b) => (Number(b.value) > Number(a.value) ? b : a)) as Row,
    )
  return {
    open: sumRows(open, ['code', 'queue']).sort((a, b) => Number(b.n) - Number(a.n) || byColumns('code')(a, b)),
    waiting: sumRows(waiting, ['status']),
    lag: largest(lag, 'source').sort(byColumns('source')),
    latest: latest.sort((a, b) => byColumns('last_seen')(b, a) || byColumns('id')(a, b)).slice(0, 10),
    // The fullest database: each has D1's limit of its own.
    size: largest(size, 'name'),
    digests: sumRows(digests, ['kind']).sort(byColumns('kind')),
    minutes: sumRows(minutes, ['start', 'name', 'labels']),
    hours: sumRows(hours, ['start', 'name', 'labels']),
    live: sumRows(live, ['name', 'labels']),
    sent: sumRows(sent, ['transport']),
  }
}

const notificationsHref = (status: string) => `/console/notifications${queryOf({ status })}`

/**
 * The five cards: open dead letters, what waits now, what the last day's
 * notifications ended as, digests by kind, consumer lag.
 */
function Cards(props: { open: Row[]; waiting: Row[]; day: Map<Outcome, number>; digests: Row[]; lag: Row[] }) {
  const { open, waiting, day, digests, lag } = props
  return (
    <div class="cards">
      <section class="card" aria-labelledby="open-dead-letters">
        <h2 id="open-dead-letters">Open dead letters</h2>
        <Table
          label="Open dead letters by code and queue"
          head={['Code', 'Queue', 'Open']}
          numeric={[2]}
          rows={open.map((row) => [
            <code>{row.code}</code>,
            row.queue,
            <a
              href={`/console/dead-letters${queryOf({ status: 'open', code: String(row.code), queue: String(row.queue) })}`}
            >
              {row.n}
            </a>,
          ])}
        />
      </section>
      <section class="card" aria-labelledby="waiting">
        <h2 id="waiting">Waiting now</h2>
        <Table
          label="Notifications waiting, by status"
          head={['Status', 'Now']}
          numeric={[1]}
          rows={waiting
            .filter((row) => Number(row.n) > 0)
            .map((row) => [
              row.status,
              <a href={notificationsHref(String(row.status))}>{cappedCount(Number(row.n))}</a>,
            ])}
        />
      </section>
      <section class="card" aria-labelledby="last-day">
        <h2 id="last-day">Ended, last 24 h</h2>
        <Table
          label="Notifications by final status, last 24 hours"
          head={['Status', 'Count']}
          numeric={[1]}
          rows={[...day]
            .sort(([, a], [, b]) => b - a)
            .map(([status, n]) => [status, <a href={notificationsHref(status)}>{n}</a>])}
        />
      </section>
      <DigestsCard rows={digests} />
      <section class="card" aria-labelledby="lag">
        <h2 id="lag">Consumer lag</h2>
        <Table
          label="Consumer lag by source"
          head={['Source', 'Lag', 'Measured']}
          numeric={[1]}
          rows={lag.map((row) => [
            <a href={`/console/dead-letters${queryOf({ source: String(row.source) })}`}>{row.source}</a>,
            duration(Number(row.value)),
            <Time at={row.updated_at} relative />,
          ])}
        />
      </section>
    </div>
  )
}

/** Why a transport is in its state, as the overview's table says it. */
function TransportWhy(props: { provider: Provider; carrier: string | undefined; waiting: number | undefined }) {
  const { provider, carrier, waiting } = props
  const { pause } = provider
  if (provider.state === 'active') return <>mail goes through it</>
  if (provider.state === 'standby') return <>takes the mail when {carrier} cannot</>
  if (!pause) return null
  return (
    <>
      {provider.state === 'paused' ? (
        <>
          <code>{pause.code}</code>{' '}
        </>
      ) : null}
      since <Time at={pause.since} relative />: {pause.reason}
      {waiting === undefined ? null : (
        <>
          ; <a href={notificationsHref('paused')}>{cappedCount(waiting)} waiting</a>
        </>
      )}
    </>
  )
}

/** A state as the table says it. */
const STATE_WORDS: Record<Provider['state'], string> = {
  active: 'active',
  standby: 'standby',
  paused: 'paused',
  'circuit-open': 'circuit open',
}

/**
 * Each configured transport in the order mail tries them: its state — active
 * (carries the mail), standby, paused, circuit open — why, when it is
 * tried next, and the emails it sent in the last hour with its share of
 * them; a transport no longer configured that sent some in the hour too.
 */
function TransportsPanel(props: { providers: Provider[] | undefined; sent: Row[]; waiting: number | undefined }) {
  const { providers, sent, waiting } = props
  if (!providers) return <p id="transport-state">Transports: their state could not be read.</p>
  const carrier = carrierOf(providers)
  const sentBy = new Map(sent.map((row) => [String(row.transport), Number(row.sent)]))
  const total = [...sentBy.values()].reduce((sum, n) => sum + n, 0)
  const share = (n: number) => (total === 0 ? NOT_A_VALUE : `${Math.round((n / total) * 100)} %`)
  const configured = new Set(providers.map((provider) => provider.transport))
  const gone = [...sentBy.keys()].filter((transport) => !configured.has(transport)).sort()
  return (
    <section id="transport-state" aria-labelledby="transports-title">
      <h2 id="transports-title">Email transports</h2>
      <Table
        label="Email transports: state, and their share of the last hour's emails"
        head={['Transport', 'State', 'Why', 'Next try', 'Sent, last hour', 'Share']}
        numeric={[4, 5]}
        rows={[
          ...providers.map((provider) => [
            provider.transport,
            <span data-state={provider.state}>{STATE_WORDS[provider.state]}</span>,
            <TransportWhy provider={provider} carrier={carrier} waiting={carrier ? undefined : waiting} />,
            provider.pause ? <Time at={provider.pause.probe_at} relative /> : '',
            String(sentBy.get(provider.transport) ?? 0),
            share(sentBy.get(provider.transport) ?? 0),
          ]),
          ...gone.map((transport) => [
            transport,
            'not configured',
            'sent before EMAIL_TRANSPORTS changed',
            '',
            String(sentBy.get(transport) ?? 0),
            share(sentBy.get(transport) ?? 0),
          ]),
        ]}
      />
    </section>
  )
}

/** Bytes as an operator reads them: GB (10^9) or MB with one decimal. */
function bytes(value: number): string {
  return value >= 1e9 ? `${(value / 1e9).toFixed(1)} GB` : `${(value / 1e6).toFixed(1)} MB`
}

/**
 * The database's size beside D1's limit, as the cron last measured it; past
 * the limit every write fails and the pipeline stops. Retention keeps it down
 * (docs/operating.md, "Retention").
 */
function DatabaseSize(props: { size: Row | undefined }) {
  const { size } = props
  if (!size) return <p id="d1-size">Database: not measured yet (the cron measures it every minute).</p>
  const value = Number(size.value)
  const share = (value / D1_SIZE_LIMIT_BYTES) * 100
  return (
    <p id="d1-size">
      Database: <strong>{bytes(value)}</strong> of D1's {bytes(D1_SIZE_LIMIT_BYTES)} limit ({share.toFixed(1)} %),
      measured <Time at={size.updated_at} relative />.
      {share >= 80 ? <strong> Past 80 %: shorten the retention.</strong> : null}
    </p>
  )
}

/**
 * How often the overview refreshes itself unless its address says otherwise:
 * each minute, as its charts are per minute; more often shows only the
 * current minute's live count growing, at a page's D1 reads each time.
 */
const OVERVIEW_REFRESH_SECONDS = 60

/** The overview page. */
export async function overviewPage(c: ConsoleContext) {
  const now = new Date()
  const { open, waiting, lag, latest, size, digests, minutes, hours, live, sent } = await overviewData(c.env, now)
  const activity = activityOf(
    { minutes: minutes as BucketRow[], hours: hours as BucketRow[], live: live as BucketRow[] },
    now,
  )
  const page = c.get('page')
  const refresh = refreshSeconds(c.req.query('refresh'), OVERVIEW_REFRESH_SECONDS)
  return c.html(
    <Layout page={page} title="Overview" findingsListed refresh={refresh}>
      <RefreshControl path="/console" query={c.req.query()} seconds={refresh} renderedAt={now} />
      <FindingsPanel findings={page.health?.findings} operator={c.get('operator')} />
      <TransportsPanel providers={page.health?.providers} sent={sent} waiting={page.health?.waiting} />
      <DatabaseSize size={size[0]} />
      <Cards open={open} waiting={waiting} day={activity.day} digests={digests} lag={lag} />
      <ActivityCharts id="last-hour" title="The last hour, per minute" buckets={activity.minutes} per="minute" />
      <ActivityCharts id="last-week" title="The last 7 days, per hour" buckets={activity.hours} per="hour" />
      <RatesCard day={totalsByKind(activity.hours, 24)} week={totalsByKind(activity.hours, 168)} />
      <h2>Latest failures</h2>
      <Table
        label="Latest failures"
        head={['Last seen', 'Code', 'Queue', 'Event', 'Error']}
        rows={latest.map((row) => [
          <a href={`/console/dead-letters/${encodeURIComponent(String(row.id))}`}>
            <Time at={row.last_seen} relative />
          </a>,
          <code>{row.code}</code>,
          row.queue,
          row.event_id ? (
            <a href={`/console/events/${encodeURIComponent(String(row.event_id))}`}>{row.event_id}</a>
          ) : (
            ''
          ),
          String(row.error).slice(0, 120),
        ])}
      />
    </Layout>,
  )
}
