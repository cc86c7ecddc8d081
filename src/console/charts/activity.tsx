/**
 * The overview's activity: one span (the last hour per minute, or the last 7
 * days per hour) as small multiples — a panel per series, each with its own
 * scale, since events accepted and complaints differ by orders of magnitude —
 * and behind them, in a <details>, the table of the same numbers. Nothing
 * runs in the browser: the SVG is drawn here, and the table opens with
 * JavaScript off.
 */
import { SERIES, type SeriesKey } from '../../metrics/series.ts'
import type { Buckets } from './activity-data.ts'
import { seriesValues } from './activity-data.ts'
import { Bars, bucketName } from './bars.tsx'

/**
 * Each series' colour: dark enough for 3:1 against white (WCAG 1.4.11), and
 * never the only cue — every panel is captioned with its series' name.
 */
export const COLOURS: Record<SeriesKey, string> = {
  accepted: '#1f5fa8',
  sent: '#1b7f3b',
  failed: '#b3261e',
  suppressed: '#8a5a00',
  'opted-out': '#6b4fa0',
  'dead-lettered': '#7a1d5c',
  delivered: '#0f7a73',
  bounced: '#b54a00',
  complained: '#c2185b',
}

type Per = 'minute' | 'hour'

/** One span of activity: its heading, a panel per series, and the table of the same numbers. */
export function ActivityCharts(props: { id: string; title: string; buckets: Buckets; per: Per }) {
  const { id, title, buckets, per } = props
  const values = seriesValues(buckets)
  const totals = Object.fromEntries(
    SERIES.map((series) => [series.key, values[series.key].reduce((sum, value) => sum + value, 0)]),
  ) as Record<SeriesKey, number>
  return (
    <section class="activity" aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      <p class="chart-key">
        One bar per {per}, times in UTC; each panel has its own scale, its top marked on the left. Events and
        notifications come from the pipeline's own counts; delivered, bounced and complained from the providers'
        reports.
      </p>
      <div class="charts">
        {SERIES.map((series) => (
          <SeriesPanel
            id={id}
            series={series}
            per={per}
            starts={buckets.starts}
            values={values[series.key]}
            total={totals[series.key]}
          />
        ))}
      </div>
      <ActivityTable id={id} title={title} per={per} starts={buckets.starts} values={values} totals={totals} />
    </section>
  )
}

/** One series' panel: its swatch, name and total, over its bars. */
function SeriesPanel(props: {
  id: string
  series: (typeof SERIES)[number]
  per: Per
  starts: readonly string[]
  values: readonly number[]
  total: number
}) {
  const { id, series, per, starts, values, total } = props
  return (
    <figure class="chart">
      <figcaption>
        <svg class="swatch" viewBox="0 0 10 10" aria-hidden="true">
          <rect width="10" height="10" fill={COLOURS[series.key]} />
        </svg>
        {series.label}: <strong>{total}</strong> {series.unit}
      </figcaption>
      <Bars
        id={`${id}-${series.key}`}
        label={series.label}
        unit={series.unit}
        per={per}
        colour={COLOURS[series.key]}
        starts={starts}
        values={values}
      />
    </figure>
  )
}

/** The same numbers as a table, behind a <details>: each bucket with anything counted, and the totals. */
function ActivityTable(props: {
  id: string
  title: string
  per: Per
  starts: readonly string[]
  values: Record<SeriesKey, readonly number[]>
  totals: Record<SeriesKey, number>
}) {
  const { id, title, per, starts, values, totals } = props
  const rows = starts.flatMap((start, index) =>
    SERIES.some((series) => values[series.key][index] !== 0) ? [{ start, index }] : [],
  )
  return (
    <details>
      <summary>The numbers, per {per}</summary>
      <table id={`${id}-table`}>
        <caption>
          {title}: each {per} with anything counted (UTC); the others are zero.
        </caption>
        <thead>
          <tr>
            <th scope="col">{per === 'minute' ? 'Minute' : 'Hour'}</th>
            {SERIES.map((series) => (
              <th scope="col" class="num">
                {series.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 ? (
            <tr>
              <td colspan={SERIES.length + 1}>Nothing counted in this span.</td>
            </tr>
          ) : (
            rows.map(({ start, index }) => (
              <tr>
                <th scope="row">
                  <time datetime={start}>{bucketName(start, per)}</time>
                </th>
                {SERIES.map((series) => (
                  <td class="num">{values[series.key][index]}</td>
                ))}
              </tr>
            ))
          )}
          <tr class="total">
            <th scope="row">Total</th>
            {SERIES.map((series) => (
              <td class="num">{totals[series.key]}</td>
            ))}
          </tr>
        </tbody>
      </table>
    </details>
  )
}
