/**
 * One panel of the overview's small multiples: a series as bars in an SVG
 * drawn on the server, with its own scale (0 and its top, marked on the
 * left) and a time axis in UTC. Presentation attributes only, no inline
 * style: the console's Content-Security-Policy allows none.
 */

/** A bar chart's width and height in its own units; the page scales it to its column. */
const WIDTH = 300
const HEIGHT = 112
const LEFT = 34
const RIGHT = 6
const TOP = 10
const BOTTOM = 20
const INK = '#444'
const RULE = '#d0d0d0'

/** What a panel draws. */
export type BarsProps = {
  id: string
  /** The series' name, e.g. "Sent". */
  label: string
  /** What one is, e.g. "emails". */
  unit: string
  per: 'minute' | 'hour'
  colour: string
  starts: readonly string[]
  values: readonly number[]
}

/** The smallest of 1, 2, 5 × 10^k at or above `value` (at least 1): a top that reads as a round number. */
function roundTop(value: number): number {
  if (value <= 1) return 1
  const power = 10 ** Math.floor(Math.log10(value))
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power
  return 10 * power
}

/** A tick's label: a quarter hour's time, or a day's date (at 00:00 UTC). */
function tickOf(start: string, per: BarsProps['per']): string | undefined {
  if (per === 'minute') return Number(start.slice(14, 16)) % 15 === 0 ? start.slice(11, 16) : undefined
  return start.slice(11, 13) === '00' ? start.slice(5, 10) : undefined
}

const fixed = (value: number) => Math.round(value * 100) / 100

/** When a bucket is, for the description: "12:34" of a minute, "12-01 13:00" of an hour (UTC). */
export function bucketName(start: string, per: BarsProps['per']): string {
  return per === 'minute' ? start.slice(11, 16) : `${start.slice(5, 10)} ${start.slice(11, 16)}`
}

/** The panel's SVG, named by its title and described by its total and peak; the numbers are in the table beside it. */
export function Bars(props: BarsProps) {
  const { id, label, unit, per, colour, starts, values } = props
  const top = roundTop(Math.max(0, ...values))
  const plotWidth = WIDTH - LEFT - RIGHT
  const base = HEIGHT - BOTTOM
  const step = plotWidth / Math.max(1, values.length)
  // A gap between bars while they are wide enough to keep one.
  const bar = step >= 3 ? step - 1 : step
  const y = (value: number) => fixed(base - (Math.min(value, top) / top) * (base - TOP))
  const path = values
    .map((value, index) =>
      value > 0 ? `M${fixed(LEFT + index * step)} ${base}V${y(value)}h${fixed(bar)}V${base}Z` : '',
    )
    .join('')
  const total = values.reduce((sum, value) => sum + Math.max(0, value), 0)
  const peak = Math.max(0, ...values)
  const peakAt = starts[values.indexOf(peak)] ?? ''
  const description =
    total === 0
      ? `None in this span.`
      : `${total} in all; at most ${peak} in one ${per}, at ${bucketName(peakAt, per)} UTC.`
  return (
    <svg
      viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      role="img"
      aria-labelledby={`${id}-title ${id}-desc`}
      data-series={id}
      data-total={total}
    >
      <title id={`${id}-title`}>{`${label}, ${unit} per ${per}`}</title>
      <desc id={`${id}-desc`}>{description}</desc>
      <line x1={LEFT} x2={WIDTH - RIGHT} y1={TOP} y2={TOP} stroke={RULE} stroke-width="1" />
      <text x={LEFT - 4} y={TOP + 4} text-anchor="end" font-size="10" fill={INK}>
        {top}
      </text>
      <text x={LEFT - 4} y={base + 3} text-anchor="end" font-size="10" fill={INK}>
        0
      </text>
      <path d={path} fill={colour} />
      <line x1={LEFT} x2={WIDTH - RIGHT} y1={base} y2={base} stroke={INK} stroke-width="1" />
      {starts.map((start, index) => {
        const tick = tickOf(start, per)
        if (!tick) return null
        const x = fixed(LEFT + index * step)
        // A label that would run past the frame's right edge is left out; its tick stays.
        const labelled = x <= WIDTH - RIGHT - 14
        return (
          <>
            <line x1={x} x2={x} y1={base} y2={base + 4} stroke={INK} stroke-width="1" />
            {labelled ? (
              <text x={x} y={base + 14} text-anchor="middle" font-size="10" fill={INK}>
                {tick}
              </text>
            ) : null}
          </>
        )
      })}
    </svg>
  )
}
