/**
 * The overview's rates: delivery, bounce and complaint rates over the last
 * 24 hours and 7 days, for all kinds and each kind, beside the limits
 * Google, Yahoo and Resend publish — quoted and linked — and marked, in
 * words as well as colour, when near or over one.
 */
import type { SeriesKey } from '../../metrics/series.ts'
import { Table } from '../layout.tsx'
import { percent, type Rate, ratesOf, standingOf } from './rates.ts'
import { SOURCES } from './thresholds.ts'

/** A rate's cell: the percentage, and when near or over a limit, which one. */
function RateCell(props: { rate: Rate }) {
  const { rate } = props
  if (rate.value === null) return <>{rate.missing}</>
  const standing = standingOf(rate)
  const shown = percent(rate.value)
  if (standing.level === 'ok') return <>{shown}</>
  // Over: the highest limit passed; near: the lowest, still ahead.
  const limit = standing.level === 'over' ? standing.past.at(-1) : standing.lowest
  const source = limit ? SOURCES[limit.source] : undefined
  return (
    <span class={`level ${standing.level}`}>
      {shown} <strong>{standing.level}</strong>
      {limit && source ? ` ${source.who}'s ${percent(limit.limit)}` : ''}
    </span>
  )
}

/** The rows of one span: all kinds first, then each kind that sent or heard of an email. */
function rowsOf(totals: Map<string, Record<SeriesKey, number>>) {
  const kinds = [...totals.keys()]
    .filter((kind) => kind !== '')
    .filter((kind) => {
      const row = totals.get(kind) as Record<SeriesKey, number>
      return row.sent + row.delivered + row.bounced + row.complained > 0
    })
    .sort()
  return ['', ...kinds].map((kind) => {
    const row = totals.get(kind) as Record<SeriesKey, number>
    const [delivery, bounce, complaint] = ratesOf(row) as [Rate, Rate, Rate]
    return [
      kind === '' ? <strong>All kinds</strong> : kind,
      row.sent,
      row.delivered,
      <RateCell rate={delivery} />,
      row.bounced,
      <RateCell rate={bounce} />,
      row.complained,
      <RateCell rate={complaint} />,
    ]
  })
}

/** The rates card, from the totals by kind of the last 24 hours and of the last 7 days. */
export function RatesCard(props: {
  day: Map<string, Record<SeriesKey, number>>
  week: Map<string, Record<SeriesKey, number>>
}) {
  const head = ['Kind', 'Sent', 'Delivered', 'Delivery rate', 'Bounced', 'Bounce rate', 'Complained', 'Complaint rate']
  const numeric = [1, 2, 3, 4, 5, 6, 7]
  return (
    <section class="rates" aria-labelledby="rates">
      <h2 id="rates">Delivery, bounce and complaint rates</h2>
      <p>
        Delivery rate: delivered ÷ sent. Bounce rate: bounced ÷ sent. Complaint rate: complained ÷ delivered, as Google
        and Yahoo count spam reports against mail that reached the inbox. Reports come after the send, so near a span's
        start a rate may pass what it will settle at. <strong>near</strong>: at half the lowest published limit or more
        (our margin); <strong>over</strong>: at or past a published limit.
      </p>
      <h3 id="rates-day">Last 24 hours</h3>
      <Table label="Rates by kind, last 24 hours" head={head} numeric={numeric} rows={rowsOf(props.day)} />
      <h3 id="rates-week">Last 7 days</h3>
      <Table label="Rates by kind, last 7 days" head={head} numeric={numeric} rows={rowsOf(props.week)} />
      <h3 id="rates-limits">The published limits</h3>
      <ul class="limits">
        {Object.values(SOURCES).map((source) => (
          <li>
            <a href={source.url}>
              {source.who}, {source.title}
            </a>
            : <q>{source.says}</q>
          </li>
        ))}
      </ul>
      <p>
        Resend's limits bind an account at Resend; sending through Cloudflare they remain the one published bounce
        limit, and just under Google's spam rate.
      </p>
    </section>
  )
}
