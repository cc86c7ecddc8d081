/**
 * Dead letters: the API's filters plus free text, stable pages, one dead
 * letter whole, and replay or discard — of one, or of the whole filtered set,
 * always behind a preview (the count and a sample) and a confirmation.
 */
import { Hono } from 'hono'
import { allShardDbs } from '../../d1/shards.ts'
import { countDeadLetters, type DeadLetterFilter } from '../../dead-letters/reads.ts'
import type { Answer } from '../api.ts'
import type { ConsoleContext, ConsoleEnv } from '../context.ts'
import { Csrf, ErrorNote, Layout, queryOf, SelectFilter, Table, TextFilter } from '../layout.tsx'
import { needsAdmin, needsViewer } from '../page-roles.ts'
import { RefreshControl, RefreshField, refreshSeconds } from '../refresh.tsx'
import { Time } from '../time.tsx'

type Summary = {
  id: string
  queue: string
  code: string
  error: string
  source: string | null
  origin: string | null
  eventId: string | null
  kind: string | null
  status: string
  failures: number
  replays: number
  firstSeen: string
}
type Whole = Summary & {
  body: unknown
  headers: Record<string, string> | null
  history: { at: string; code: string; error: string; attempts: number | null }[]
  discardReason: string | null
  replayedAt: string | null
}

const FILTERS = ['status', 'code', 'queue', 'source', 'kind', 'q'] as const
/** A bulk action applies to this many per API call; the console calls until the set is done. */
const BULK_STEP = 1000
/**
 * At most this many API calls per bulk action — 100,000 dead letters, fewer for a replay of large
 * ones, whose pages hold 8 MiB of bodies: beyond, the operator runs it again.
 */
const BULK_CALLS = 100

function filtersOf(values: Record<string, string | undefined>): DeadLetterFilter {
  const filter: DeadLetterFilter = {}
  for (const key of FILTERS) {
    const value = values[key]?.trim()
    if (value) filter[key] = value
  }
  return filter
}

function Filters(props: { filter: DeadLetterFilter; refresh: string | undefined }) {
  const { filter } = props
  return (
    <form class="filters" method="get" action="/console/dead-letters">
      <RefreshField value={props.refresh} />
      <label>
        Search (event id, message id or error)
        <input type="search" name="q" value={filter.q ?? ''} />
      </label>
      <SelectFilter name="status" label="Status" values={['open', 'replayed', 'discarded']} value={filter.status} />
      <TextFilter name="code" label="Code" value={filter.code} />
      <SelectFilter
        name="queue"
        label="Queue"
        values={['notify-events', 'notify-dispatch', 'notify-email-events']}
        value={filter.queue}
      />
      <SelectFilter
        name="source"
        label="Source"
        values={['postgres', 'rabbitmq', 'kafka', 'http']}
        value={filter.source}
      />
      <TextFilter name="kind" label="Kind" value={filter.kind} />
      <button type="submit">Filter</button>
    </form>
  )
}

export const deadLetterPages = new Hono<ConsoleEnv>()

deadLetterPages.get('/', needsViewer, async (c) => {
  const filter = filtersOf(c.req.query())
  const cursor = c.req.query('cursor')
  // The list refreshes itself only when asked to: its address carries the interval, beside the filters.
  const refresh = refreshSeconds(c.req.query('refresh'), undefined)
  const kept = refresh === undefined ? undefined : String(refresh)
  const answer = await c.get('api')<{ items: Summary[]; nextCursor: string | null }>(
    'GET',
    `/v1/dead-letters${queryOf({ ...filter, cursor, limit: '50' })}`,
  )
  const admin = c.get('operator').role === 'admin'
  const items = answer.body.items ?? []
  return c.html(
    <Layout page={c.get('page')} title="Dead letters" refresh={refresh}>
      <RefreshControl path="/console/dead-letters" query={c.req.query()} seconds={refresh} renderedAt={new Date()} />
      <Filters filter={filter} refresh={kept} />
      <ErrorNote error={answer.body.error} />
      {admin && items.length > 0 ? (
        <div class="actions">
          <a class="button" href={`/console/dead-letters/bulk${queryOf({ ...filter, action: 'replay' })}`}>
            Replay all matching…
          </a>
          <a class="button secondary" href={`/console/dead-letters/bulk${queryOf({ ...filter, action: 'discard' })}`}>
            Discard all matching…
          </a>
        </div>
      ) : null}
      <Table
        label="Dead letters"
        head={['First seen', 'Status', 'Code', 'Queue', 'Source', 'Event', 'Kind', 'Fails', 'Error']}
        numeric={[7]}
        rows={items.map((item) => [
          <a href={`/console/dead-letters/${encodeURIComponent(item.id)}`}>
            <Time at={item.firstSeen} relative />
          </a>,
          item.status,
          <code>{item.code}</code>,
          item.queue,
          item.source ?? '',
          item.eventId ? <a href={`/console/events/${encodeURIComponent(item.eventId)}`}>{item.eventId}</a> : '',
          item.kind ?? '',
          item.failures,
          item.error.slice(0, 140),
        ])}
      />
      {answer.body.nextCursor ? (
        <p>
          <a href={`/console/dead-letters${queryOf({ ...filter, cursor: answer.body.nextCursor, refresh: kept })}`}>
            Next page
          </a>
        </p>
      ) : null}
    </Layout>,
    answer.status === 200 ? 200 : 400,
  )
})

deadLetterPages.get('/bulk', needsViewer, async (c) => {
  const action = c.req.query('action') === 'discard' ? 'discard' : 'replay'
  const filter = filtersOf(c.req.query())
  const scope = { ...filter, status: action === 'discard' ? 'open' : (filter.status ?? 'open') }
  const counts = await Promise.all(allShardDbs(c.env).map((db) => countDeadLetters(db, scope)))
  const count = counts.reduce((sum, n) => sum + n, 0)
  const dryRun = await c.get('api')<{ matched: Summary[] }>('POST', `/v1/dead-letters/${action}`, {
    ...filter,
    ...(action === 'discard' ? { reason: 'preview' } : {}),
    dryRun: true,
    max: 10,
  })
  return c.html(
    <Layout page={c.get('page')} title={action === 'replay' ? 'Replay the filtered set?' : 'Discard the filtered set?'}>
      <ErrorNote error={dryRun.body.error} />
      <p class="note">
        This {action === 'replay' ? 'replays' : 'discards'} <strong>{count}</strong> {scope.status} dead letter
        {count === 1 ? '' : 's'} — every one that matches the filters, not only the page you saw. The first{' '}
        {Math.min(10, count)}:
      </p>
      <Table
        label="Sample of the set"
        head={['First seen', 'Code', 'Queue', 'Event', 'Error']}
        rows={(dryRun.body.matched ?? []).map((item) => [
          <Time at={item.firstSeen} relative />,
          <code>{item.code}</code>,
          item.queue,
          item.eventId ?? '',
          item.error.slice(0, 100),
        ])}
      />
      <form method="post" action="/console/dead-letters/bulk">
        <Csrf page={c.get('page')} />
        <input type="hidden" name="action" value={action} />
        {Object.entries(filter).map(([key, value]) => (
          <input type="hidden" name={key} value={value} />
        ))}
        {action === 'discard' ? (
          <label>
            Reason (kept with each dead letter)
            <input name="reason" required maxlength={1000} />
          </label>
        ) : null}
        <div class="actions">
          <button type="submit" class={action === 'discard' ? 'danger' : undefined} disabled={count === 0}>
            {action === 'replay' ? `Replay ${count}` : `Discard ${count}`}
          </button>
          <a class="button secondary" href={`/console/dead-letters${queryOf(filter)}`}>
            Cancel
          </a>
        </div>
      </form>
    </Layout>,
  )
})

/** What a bulk replay or discard call answers. */
type BulkAnswer = { replayed?: string[]; discarded?: string[]; skipped?: unknown[]; nextCursor?: string | null }

deadLetterPages.post('/bulk', needsAdmin, async (c) => {
  const form = (await c.req.parseBody()) as Record<string, string>
  const action = form.action === 'discard' ? 'discard' : 'replay'
  const filter = filtersOf(form)
  const api = c.get('api')
  let done = 0
  let skipped = 0
  let error: { code: string; message: string } | undefined
  let cursor: string | null = null
  // The API takes up to 1000 per call. A discarded dead letter leaves the open set, so discarding
  // calls until a call changes nothing. A replay goes once over the set, page after page (a page is
  // cut to what one call can hold) by each answer's nextCursor, which also passes over what it skipped.
  for (let call = 0; call < BULK_CALLS; call += 1) {
    const answer: Answer<BulkAnswer> = await api<BulkAnswer>('POST', `/v1/dead-letters/${action}`, {
      ...filter,
      ...(action === 'discard' ? { reason: form.reason } : cursor ? { cursor } : {}),
      max: BULK_STEP,
    })
    if (answer.status !== 200) {
      error = answer.body.error
      break
    }
    const changed = (answer.body.replayed ?? answer.body.discarded ?? []).length
    done += changed
    skipped += answer.body.skipped?.length ?? 0
    if (action === 'replay') {
      cursor = answer.body.nextCursor ?? null
      if (cursor === null) break
    } else if (changed === 0) break
  }
  return c.html(
    <Layout page={c.get('page')} title={action === 'replay' ? 'Replayed' : 'Discarded'}>
      <ErrorNote error={error} />
      <p class="ok" role="status">
        {action === 'replay' ? 'Replayed' : 'Discarded'} {done} dead letter{done === 1 ? '' : 's'}
        {skipped ? `; ${skipped} could not be replayed (see each one)` : ''}.
      </p>
      <p>
        <a href={`/console/dead-letters${queryOf({ ...filter, status: undefined })}`}>Back to the list</a> ·{' '}
        <a href="/console/audit">Audit trail</a>
      </p>
    </Layout>,
    error ? 400 : 200,
  )
})

/** The original payload of a dead inbound event: its exact text, or its bytes when it is not text. */
function originalOf(letter: Whole): { text: string; encoding: 'utf8' | 'base64' } | undefined {
  const message = letter.body as { body?: unknown; bodyEncoding?: unknown } | null
  if (!message || typeof message.body !== 'string') return undefined
  return { text: message.body, encoding: message.bodyEncoding === 'base64' ? 'base64' : 'utf8' }
}

function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2)
  } catch {
    return text
  }
}

/** What a dead letter is: status, first seen and last replayed, queue, source, event, kind, counts, discard reason. */
function Facts(props: { letter: Whole }) {
  const { letter } = props
  return (
    <dl>
      <dt>Status</dt>
      <dd>{letter.status}</dd>
      <dt>First seen</dt>
      <dd>
        <Time at={letter.firstSeen} />
      </dd>
      {letter.replayedAt ? (
        <>
          <dt>Last replayed</dt>
          <dd>
            <Time at={letter.replayedAt} />
          </dd>
        </>
      ) : null}
      <dt>Queue</dt>
      <dd>{letter.queue}</dd>
      <dt>Source</dt>
      <dd>
        {letter.source ?? ''} {letter.origin ? <code>{letter.origin}</code> : null}
      </dd>
      <dt>Event</dt>
      <dd>
        {letter.eventId ? <a href={`/console/events/${encodeURIComponent(letter.eventId)}`}>{letter.eventId}</a> : '—'}
      </dd>
      <dt>Kind</dt>
      <dd>{letter.kind ?? '—'}</dd>
      <dt>Failures / replays</dt>
      <dd>
        {letter.failures} / {letter.replays}
      </dd>
      {letter.discardReason ? (
        <>
          <dt>Discarded because</dt>
          <dd>{letter.discardReason}</dd>
        </>
      ) : null}
    </dl>
  )
}

/** One dead letter, whole: what it is, its actions, its error history, headers and original body. */
function DeadLetterPage(props: { c: ConsoleContext; id: string; letter: Whole }) {
  const { c, id, letter } = props
  const original = originalOf(letter)
  const admin = c.get('operator').role === 'admin'
  return (
    <Layout page={c.get('page')} title={`Dead letter ${letter.code}`}>
      <Facts letter={letter} />
      {admin && letter.status === 'open' ? (
        <div class="actions">
          <a class="button" href={`/console/dead-letters/${encodeURIComponent(id)}/replay`}>
            Replay…
          </a>
          <a class="button secondary" href={`/console/dead-letters/${encodeURIComponent(id)}/discard`}>
            Discard…
          </a>
        </div>
      ) : null}
      <h2>Error history</h2>
      <Table
        label="Error history"
        head={['At', 'Code', 'Attempts', 'Error']}
        rows={letter.history.map((entry) => [
          <Time at={entry.at} />,
          <code>{entry.code}</code>,
          entry.attempts ?? '',
          entry.error,
        ])}
      />
      <h2>Headers</h2>
      <pre>{JSON.stringify(letter.headers ?? {}, null, 2)}</pre>
      <h2>Original body</h2>
      {original ? (
        <>
          <p>
            <a href={`/console/dead-letters/${encodeURIComponent(id)}/original`}>Download the exact bytes</a>
            {original.encoding === 'base64' ? ' (not UTF-8: shown as base64)' : ''}
          </p>
          <pre>{original.encoding === 'utf8' ? pretty(original.text) : original.text}</pre>
        </>
      ) : (
        <pre>{JSON.stringify(letter.body, null, 2)}</pre>
      )}
    </Layout>
  )
}

deadLetterPages.get('/:id', needsViewer, async (c) => {
  const id = c.req.param('id')
  const answer = await c.get('api')<Whole>('GET', `/v1/dead-letters/${encodeURIComponent(id)}`)
  if (answer.status !== 200) return c.notFound()
  return c.html(<DeadLetterPage c={c} id={id} letter={answer.body} />)
})

deadLetterPages.get('/:id/original', needsViewer, async (c) => {
  const id = c.req.param('id')
  const answer = await c.get('api')<Whole>('GET', `/v1/dead-letters/${encodeURIComponent(id)}`)
  if (answer.status !== 200) return c.notFound()
  const original = originalOf(answer.body)
  const bytes = original
    ? original.encoding === 'base64'
      ? Uint8Array.from(atob(original.text), (char) => char.charCodeAt(0))
      : new TextEncoder().encode(original.text)
    : new TextEncoder().encode(JSON.stringify(answer.body.body))
  c.header('content-disposition', `attachment; filename="dead-letter-${id.replace(/[^\w.-]/g, '_')}.bin"`)
  return c.body(bytes.slice().buffer as ArrayBuffer, 200, { 'content-type': 'application/octet-stream' })
})

for (const action of ['replay', 'discard'] as const) {
  deadLetterPages.get(`/:id/${action}`, needsViewer, (c) => {
    const id = c.req.param('id')
    return c.html(
      <Layout
        page={c.get('page')}
        title={action === 'replay' ? 'Replay this dead letter?' : 'Discard this dead letter?'}
      >
        <p>
          {action === 'replay'
            ? 'Its original message goes back to the queue it died on. An event processed since ends as a duplicate: no second email.'
            : 'It stays in the list as discarded, with your reason.'}
        </p>
        <form method="post" action={`/console/dead-letters/${encodeURIComponent(id)}/${action}`}>
          <Csrf page={c.get('page')} />
          {action === 'discard' ? (
            <label>
              Reason
              <input name="reason" required maxlength={1000} />
            </label>
          ) : null}
          <div class="actions">
            <button type="submit" class={action === 'discard' ? 'danger' : undefined}>
              {action === 'replay' ? 'Replay' : 'Discard'}
            </button>
            <a class="button secondary" href={`/console/dead-letters/${encodeURIComponent(id)}`}>
              Cancel
            </a>
          </div>
        </form>
      </Layout>,
    )
  })
  deadLetterPages.post(`/:id/${action}`, needsAdmin, async (c) => {
    const id = c.req.param('id')
    const form = (await c.req.parseBody()) as Record<string, string>
    const answer = await c.get('api')(
      'POST',
      `/v1/dead-letters/${encodeURIComponent(id)}/${action}`,
      action === 'discard' ? { reason: form.reason } : {},
    )
    if (answer.status === 200) return c.redirect(`/console/dead-letters/${encodeURIComponent(id)}`, 303)
    return c.html(
      <Layout page={c.get('page')} title="Not done">
        <ErrorNote error={answer.body.error} />
        <p>
          <a href={`/console/dead-letters/${encodeURIComponent(id)}`}>Back to the dead letter</a>
        </p>
      </Layout>,
      answer.status >= 500 ? 503 : 400,
    )
  })
}
