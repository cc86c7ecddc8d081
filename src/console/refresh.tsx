/**
 * Pages that keep themselves current: the overview (every minute unless the
 * operator says otherwise) and the dead-letter list (when asked). The
 * interval is part of the page's address (`?refresh=60`, or `off`), beside
 * the operator's filters, so a refresh — which loads that same address —
 * keeps both, and a bookmark or a link keeps them too.
 *
 * With JavaScript on, a small script of the layout (under the page's CSP
 * nonce) fetches the address and swaps the page's `<main>` in place: the
 * scroll position stays, open "numbers" tables stay open, and nothing is
 * swapped while the operator works in the page (focus inside it, text
 * selected) or the tab is hidden. A session that ended is said, not swapped
 * for the sign-in form. With JavaScript off, `<meta http-equiv=refresh>`
 * inside `<noscript>` reloads the same address.
 */
import { raw } from 'hono/html'
import { Time } from './time.tsx'

/** The shortest interval the address may ask for: each refresh is a page's reads from D1. */
export const MIN_REFRESH_SECONDS = 5

/** The longest: beyond an hour, a reload by hand is as good. */
export const MAX_REFRESH_SECONDS = 3600

/** The intervals offered, in seconds. Another within the bounds may be given in the address. */
const CHOICES: readonly number[] = [15, 60, 300]

/**
 * The interval a page refreshes at, in seconds, or undefined for none: the
 * address's `refresh` (a whole number of seconds within the bounds, or
 * `off`), else the page's default. Anything else is the default too.
 */
export function refreshSeconds(value: string | undefined, fallback: number | undefined): number | undefined {
  if (value === 'off') return undefined
  if (value === undefined || !/^\d{1,4}$/.test(value)) return fallback
  const seconds = Number(value)
  return seconds >= MIN_REFRESH_SECONDS && seconds <= MAX_REFRESH_SECONDS ? seconds : fallback
}

/** How an interval reads in the control. */
function every(seconds: number): string {
  if (seconds % 60 !== 0) return `every ${seconds} s`
  return seconds === 60 ? 'every minute' : `every ${seconds / 60} min`
}

/**
 * The control: a plain GET form that keeps every other parameter of the
 * address (the filters, the page) as hidden fields, and when the page was
 * last rendered.
 */
export function RefreshControl(props: {
  path: string
  query: Record<string, string>
  seconds: number | undefined
  renderedAt: Date
}) {
  const { path, query, seconds, renderedAt } = props
  const choices =
    seconds === undefined || CHOICES.includes(seconds) ? CHOICES : [...CHOICES, seconds].sort((a, b) => a - b)
  return (
    <form id="refresh" class="refresh" method="get" action={path}>
      {Object.entries(query)
        .filter(([name]) => name !== 'refresh')
        .map(([name, value]) => (
          <input type="hidden" name={name} value={value} />
        ))}
      <label for="refresh-every">
        Refresh
        <select id="refresh-every" name="refresh">
          <option value="off" selected={seconds === undefined}>
            off
          </option>
          {choices.map((choice) => (
            <option value={String(choice)} selected={choice === seconds}>
              {every(choice)}
            </option>
          ))}
        </select>
      </label>
      <button type="submit" class="secondary">
        Apply
      </button>
      <span id="refresh-state">
        Updated <Time at={renderedAt.toISOString()} relative />
      </span>
    </form>
  )
}

/** The hidden field that carries a chosen interval through another form of the page (a filter form). */
export function RefreshField(props: { value: string | undefined }) {
  return props.value ? <input type="hidden" name="refresh" value={props.value} /> : null
}

/** What the layout puts in `<head>` for a page that refreshes: the reload without JavaScript. */
export function RefreshMeta(props: { seconds: number | undefined }) {
  if (props.seconds === undefined) return null
  return <noscript>{raw(`<meta http-equiv="refresh" content="${props.seconds}">`)}</noscript>
}

/**
 * The browser's half: every `data-refresh` seconds of `<body>`, the page's
 * own address fetched and its `<main>` swapped in, then the times shown in
 * the browser's zone again (the `console:refreshed` event, ./time.tsx).
 */
export const REFRESH_SCRIPT = `(() => {
  const seconds = Number(document.body.dataset.refresh);
  if (!(seconds > 0)) return;
  const say = (text) => {
    const state = document.getElementById('refresh-state');
    if (state) state.textContent = text;
  };
  const busy = () => {
    const active = document.activeElement;
    return document.hidden || (active && active !== document.body && active.closest('main')) ||
      String(getSelection() ?? '').length > 0;
  };
  const tick = async () => {
    if (busy()) return schedule();
    try {
      const response = await fetch(location.href, { credentials: 'same-origin', headers: { accept: 'text/html' } });
      if (response.redirected && new URL(response.url).pathname === '/console/sign-in') {
        say('Signed out: sign in again to see this page current.');
        return;
      }
      if (!response.ok) throw new Error('HTTP ' + response.status);
      const next = new DOMParser().parseFromString(await response.text(), 'text/html').querySelector('main');
      const main = document.querySelector('main');
      if (!next || !main) throw new Error('no page in the answer');
      const open = [...main.querySelectorAll('details')].map((details) => details.open);
      next.querySelectorAll('details').forEach((details, index) => { if (open[index]) details.open = true; });
      main.replaceWith(document.adoptNode(next));
      document.dispatchEvent(new Event('console:refreshed'));
    } catch (error) {
      say('Could not refresh (' + (error instanceof Error ? error.message : String(error)) + '): trying again.');
    }
    schedule();
  };
  const schedule = () => setTimeout(tick, seconds * 1000);
  schedule();
})();`
