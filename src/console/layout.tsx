/** The console's page shell and the small pieces every page uses. */
import { html, raw } from 'hono/html'
import type { Child } from 'hono/jsx'
import type { Operator } from '../audit/operator.ts'
import { CHART_CSS } from './charts/style.ts'
import { HealthBanner, type PageHealth } from './health.tsx'
import { REFRESH_SCRIPT, RefreshMeta } from './refresh.tsx'
import { LOCAL_TIME_SCRIPT } from './time.tsx'

// Written into the page raw: it is ours, and escaped, the quotes of its attribute selectors would break it.
const CSS = `
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,sans-serif;color:#1b1b1b;background:#fff}
header{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;align-items:center;padding:.6rem 1rem;background:#12263a;color:#fff}
header a,header button{color:#fff}
header nav ul{display:flex;flex-wrap:wrap;gap:.25rem 1rem;list-style:none;margin:0;padding:0}
header .who{margin-left:auto;display:flex;gap:.75rem;align-items:center}
header button{background:none;border:1px solid #fff;border-radius:4px;padding:.2rem .6rem;font:inherit;cursor:pointer}
main{padding:1rem;max-width:1200px}
a{color:#0645ad}
a:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible,textarea:focus-visible,[tabindex]:focus-visible{outline:3px solid #f5a623;outline-offset:2px}
.skip{position:absolute;left:-999px}.skip:focus{left:1rem;top:.5rem;background:#fff;color:#000;padding:.3rem;z-index:9}
h1{font-size:1.5rem;margin:.2rem 0 1rem;overflow-wrap:anywhere}h2{font-size:1.15rem;margin:1.5rem 0 .5rem}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{border-bottom:1px solid #ccc;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f3f6}
td.num,th.num{text-align:right}
/* Codes and ids break rather than widen their table past the screen. */
td code,td a[href^="/console/events/"]{overflow-wrap:anywhere}
code,pre{font-family:ui-monospace,monospace;font-size:.85rem}
pre{background:#f5f5f5;border:1px solid #ddd;padding:.6rem;overflow:auto;max-height:32rem;white-space:pre-wrap;word-break:break-all}
form.filters{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:end;margin-bottom:1rem}
form.refresh{display:flex;flex-wrap:wrap;gap:.25rem .75rem;align-items:end;margin:-.5rem 0 1rem;font-size:.85rem}
form.refresh label{flex-direction:row;align-items:center;gap:.4rem}
form.refresh button{padding:.15rem .6rem}
#refresh-state{color:#444;align-self:center}
label{display:flex;flex-direction:column;font-size:.85rem;gap:.15rem}
input,select,textarea{font:inherit;padding:.3rem .4rem;border:1px solid #767676;border-radius:4px;max-width:100%}
textarea{width:100%;min-height:8rem;font-family:ui-monospace,monospace}
button,.button{font:inherit;padding:.35rem .8rem;border-radius:4px;border:1px solid #12263a;background:#12263a;color:#fff;cursor:pointer;text-decoration:none;display:inline-block}
button.secondary,.button.secondary{background:#fff;color:#12263a}
button.danger{background:#a4161a;border-color:#a4161a}
.actions{display:flex;flex-wrap:wrap;gap:.5rem;margin:.75rem 0}
.note{background:#fff8e1;border:1px solid #e0c060;padding:.5rem .75rem;border-radius:4px}
.error{background:#fdecea;border:1px solid #c62828;padding:.5rem .75rem;border-radius:4px}
.ok{background:#e8f5e9;border:1px solid #2e7d32;padding:.5rem .75rem;border-radius:4px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:0}dt{font-weight:600}dd{margin:0;min-width:0;overflow-wrap:anywhere}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,24rem),1fr));gap:1rem}
.card{border:1px solid #ccc;border-radius:6px;padding:.75rem;min-width:0}
/* An in-app item's preview: its text as a feed shows it, line breaks kept, a long word broken. */
.item p{white-space:pre-wrap;overflow-wrap:anywhere;margin:0 0 .5rem}
iframe{width:100%;min-height:28rem;border:1px solid #ccc}
/* On a phone a wide table is a column of cards: its head hidden but still read, each cell under its column's name. */
@media (max-width:40rem){
th,td{padding:.3rem .35rem}
.stack thead{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}
.stack table,.stack tbody,.stack tr{display:block}
.stack tr{border:1px solid #ccc;border-radius:6px;margin-bottom:.5rem;padding:.25rem 0}
.stack td{display:block;border:0}
.stack td[data-label]{display:flex;gap:.5rem;text-align:left;overflow-wrap:anywhere}
.stack td[data-label]::before{content:attr(data-label);font-weight:600;flex:0 0 7rem}
.stack td[data-label]>span{flex:1;min-width:0}
.stack td:has(>span:empty){display:none}
}
`

/** What every page needs: its CSP nonce, the operator and the session's CSRF token. */
export type PageContext = {
  nonce: string
  operator?: Operator
  csrf?: string
  /** A paused transport and the doctor's findings, at the top of every page of a signed-in operator. */
  health?: PageHealth
}

const NAV: [string, string][] = [
  ['/console', 'Overview'],
  ['/console/dead-letters', 'Dead letters'],
  ['/console/events', 'Event stories'],
  ['/console/templates', 'Templates'],
  ['/console/contacts', 'Contacts'],
  ['/console/audit', 'Audit trail'],
]

/**
 * A whole page. `findingsListed`: the page lists the findings itself (the
 * overview), so the top line is left out. `refresh`: the page reloads itself
 * every so many seconds (./refresh.tsx).
 */
export function Layout(props: {
  page: PageContext
  title: string
  children: Child
  findingsListed?: boolean
  refresh?: number
}) {
  const { page } = props
  return html`<!DOCTYPE html>${(
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · notify-edge console`}</title>
        <style nonce={page.nonce}>{raw(CSS + CHART_CSS)}</style>
        <RefreshMeta seconds={props.refresh} />
      </head>
      <body data-refresh={props.refresh === undefined ? undefined : String(props.refresh)}>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header>
          <strong>notify-edge</strong>
          {page.operator ? (
            <nav aria-label="Console">
              <ul>
                {NAV.map(([href, label]) => (
                  <li>
                    <a href={href}>{label}</a>
                  </li>
                ))}
              </ul>
            </nav>
          ) : null}
          {page.operator ? (
            <div class="who">
              <span>
                {page.operator.name} ({page.operator.role})
              </span>
              <form method="post" action="/console/sign-out">
                <Csrf page={page} />
                <button type="submit">Sign out</button>
              </form>
            </div>
          ) : null}
        </header>
        <main id="main">
          {page.health ? (
            <HealthBanner health={page.health} operator={page.operator} listed={props.findingsListed} />
          ) : null}
          <h1>{props.title}</h1>
          {props.children}
        </main>
        <script nonce={page.nonce}>
          {raw(props.refresh === undefined ? LOCAL_TIME_SCRIPT : LOCAL_TIME_SCRIPT + REFRESH_SCRIPT)}
        </script>
      </body>
    </html>
  )}`
}

/** The hidden CSRF field of a form that changes something. */
export function Csrf(props: { page: PageContext }) {
  return <input type="hidden" name="_csrf" value={props.page.csrf ?? ''} />
}

/** A text field of a filter form, filled with the filter's current value. */
export function TextFilter(props: { name: string; label: string; value: string | undefined }) {
  return (
    <label>
      {props.label}
      <input name={props.name} value={props.value ?? ''} />
    </label>
  )
}

/** A select of a filter form: "any", then each value, the current one selected. */
export function SelectFilter(props: { name: string; label: string; values: readonly string[]; value?: string }) {
  return (
    <label for={`filter-${props.name}`}>
      {props.label}
      <select id={`filter-${props.name}`} name={props.name}>
        <option value="">any</option>
        {props.values.map((value) => (
          <option value={value} selected={value === props.value}>
            {value}
          </option>
        ))}
      </select>
    </label>
  )
}

/**
 * From this many columns a table stacks on a phone: squeezed into 390 px, such rows break their words
 * into columns of letters or hide their last column behind a sideways scroll.
 */
const STACK_FROM_COLUMNS = 4

/**
 * A table that scrolls sideways inside its own box when it is wider than the
 * screen, reachable by keyboard and named, so nothing of it is cut off and
 * the page itself never scrolls sideways. A wide one (four columns or more:
 * the dead-letter list, an event's story, the audit trail) is a list of cards
 * on a phone instead: each row a card, each cell under its column's name,
 * nothing to scroll to.
 */
export function Table(props: { label: string; head: string[]; rows: Child[][]; numeric?: number[] }) {
  const stacked = props.head.length >= STACK_FROM_COLUMNS
  return (
    <section class={stacked ? 'scroll stack' : 'scroll'} aria-label={props.label} tabindex={0}>
      <table>
        <thead>
          <tr>
            {props.head.map((cell, index) => (
              <th scope="col" class={props.numeric?.includes(index) ? 'num' : undefined}>
                {cell}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.length === 0 ? (
            <tr>
              <td colspan={props.head.length}>Nothing here.</td>
            </tr>
          ) : (
            props.rows.map((row) => (
              <tr>
                {row.map((cell, index) => (
                  <td
                    class={props.numeric?.includes(index) ? 'num' : undefined}
                    data-label={stacked ? props.head[index] : undefined}
                  >
                    {/* One box for the cell's content, however many parts: stacked, it sits beside its label. */}
                    {stacked ? <span>{cell}</span> : cell}
                  </td>
                ))}
              </tr>
            ))
          )}
        </tbody>
      </table>
    </section>
  )
}

/** An API error, shown as the page's message. */
export function ErrorNote(props: {
  error?: { code: string; message: string; issues?: { field: string; message: string }[] }
}) {
  if (!props.error) return null
  return (
    <div class="error" role="alert">
      <strong>{props.error.code}</strong>: {props.error.message}
      {props.error.issues?.length ? (
        <ul>
          {props.error.issues.map((issue) => (
            <li>
              <code>{issue.field}</code>: {issue.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  )
}

/** A query string of the non-empty values. */
export function queryOf(values: Record<string, string | undefined | null>): string {
  const query = new URLSearchParams()
  for (const [key, value] of Object.entries(values)) if (value) query.set(key, value)
  const text = query.toString()
  return text ? `?${text}` : ''
}
