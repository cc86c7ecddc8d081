/**
 * Times on a console page, in the operator's own time zone. The Worker does
 * not know that zone, so a page carries each instant as
 * `<time datetime="…UTC ISO…" title="… UTC">2026-12-02 06:54 UTC</time>` —
 * readable as it is with JavaScript off — and a small script of the layout
 * rewrites the text to the browser's zone ("Dec 2, 2026, 12:39 GMT+5:45"),
 * or, for a time in a list, to how long ago it was ("4 minutes ago"), the
 * UTC instant staying on hover.
 */
import { instantOf, utcMinute, utcSecond } from './format.ts'

/**
 * One instant. `relative` marks a time in a list, where "how long ago" is
 * what an operator scans for. A missing time renders nothing; one that does
 * not parse, its text as stored (better than hiding it).
 */
export function Time(props: { at: string | number | null | undefined; relative?: boolean }) {
  const at = instantOf(props.at)
  if (!at) return <>{props.at ?? ''}</>
  return (
    <time datetime={at.toISOString()} title={utcSecond(at)} data-relative={props.relative ? '' : undefined}>
      {utcMinute(at)}
    </time>
  )
}

/**
 * The browser's half, run by the layout under the page's CSP nonce: every
 * `<time datetime>` to the browser's zone, a relative one to "… ago" / "in …"
 * (refreshed every 30 s, so an open page does not go stale, and after the
 * page refreshed itself). The words stay
 * English, as the console's are; only the zone is the browser's. Intl only:
 * no date library is loaded.
 */
export const LOCAL_TIME_SCRIPT = `(() => {
  const absolute = new Intl.DateTimeFormat('en', {
    year: 'numeric', month: 'short', day: 'numeric',
    hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZoneName: 'short',
  });
  const relative = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
  const units = [['day', 86400], ['hour', 3600], ['minute', 60], ['second', 1]];
  const fromNow = (at) => {
    const seconds = (at - Date.now()) / 1000;
    const [unit, size] = units.find(([, size]) => Math.abs(seconds) >= size) ?? units[3];
    return relative.format(Math.trunc(seconds / size), unit);
  };
  const show = () => {
    for (const time of document.querySelectorAll('time[datetime]')) {
      const at = Date.parse(time.dateTime);
      if (Number.isNaN(at)) continue;
      time.dataset.utc ??= time.title;
      const local = absolute.format(at);
      if ('relative' in time.dataset) {
        time.textContent = fromNow(at);
        time.title = local + ' · ' + time.dataset.utc;
      } else {
        time.textContent = local;
      }
    }
  };
  show();
  setInterval(show, 30000);
  // A page that refreshed itself (./refresh.tsx) has new times to show.
  document.addEventListener('console:refreshed', show);
})();`

/** An ISO 8601 instant in UTC as the API writes them, inside a text. */
const ISO_INSTANT = /\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?Z/g

/**
 * A text the API wrote for people and machines alike (a finding's message:
 * "paused since 2026-12-02T06:54:13.120Z"), each ISO instant in it shown as
 * a `<Time>`, so it reads as every other time of the console does.
 */
export function TextWithTimes(props: { text: string }) {
  const parts: (string | ReturnType<typeof Time>)[] = []
  let last = 0
  for (const match of props.text.matchAll(ISO_INSTANT)) {
    parts.push(props.text.slice(last, match.index), <Time at={match[0]} />)
    last = match.index + match[0].length
  }
  parts.push(props.text.slice(last))
  return <>{parts}</>
}
