/**
 * Lookups: recent notifications by status, a contact and the reviewer pool,
 * and the audit trail with its filters and pages.
 */
import { Hono } from 'hono'
import type { AuditRecord } from '../../audit/record.ts'
import { configOf } from '../../config.ts'
import { byColumns, rowsEverywhere } from '../../d1/shards.ts'
import { isNotificationStatus, NOTIFICATION_STATUSES } from '../../notifications/status.ts'
import { maskAddress } from '../../privacy.ts'
import type { ConsoleEnv } from '../context.ts'
import { Csrf, ErrorNote, Layout, queryOf, SelectFilter, Table, TextFilter } from '../layout.tsx'
import { needsViewer } from '../page-roles.ts'
import { openSessions } from '../sessions.ts'
import { sessionLimits } from '../signed-in.ts'
import { Time } from '../time.tsx'

export const lookupPages = new Hono<ConsoleEnv>()

lookupPages.get('/notifications', needsViewer, async (c) => {
  const asked = c.req.query('status')
  const status = isNotificationStatus(asked) ? asked : undefined
  // The newest hundred of every D1 shard, merged: the newest hundred of all.
  const [found = []] = await rowsEverywhere(c.env, (db) => [
    db
      .prepare(
        `SELECT id, event_id, kind, status, created_at, is_digest, digest_size FROM notifications
         WHERE (?1 IS NULL OR status = ?1) ORDER BY created_at DESC, id LIMIT 100`,
      )
      .bind(status ?? null),
  ])
  const results = found.sort((a, b) => byColumns('created_at')(b, a) || byColumns('id')(a, b)).slice(0, 100) as {
    id: string
    event_id: string
    kind: string
    status: string
    created_at: string
    is_digest: number
    digest_size: number | null
  }[]
  return c.html(
    <Layout page={c.get('page')} title={`Notifications${status ? `: ${status}` : ''}`}>
      <form class="filters" method="get" action="/console/notifications">
        <SelectFilter name="status" label="Status" values={NOTIFICATION_STATUSES} value={status} />
        <button type="submit">Filter</button>
      </form>
      <p>The latest 100.</p>
      <Table
        label="Notifications"
        head={['Created', 'Kind', 'Status', 'Event']}
        rows={results.map((row) => [
          <a href={`/console/notifications/${encodeURIComponent(row.id)}`}>
            <Time at={row.created_at} relative />
          </a>,
          row.kind,
          row.status,
          // A digest has no event of its own: its page lists the events it tells.
          row.is_digest ? (
            `a digest${row.digest_size === null ? '' : ` of ${row.digest_size}`}`
          ) : (
            <a href={`/console/events/${encodeURIComponent(row.event_id)}`}>{row.event_id}</a>
          ),
        ])}
      />
    </Layout>,
  )
})

lookupPages.get('/contacts', needsViewer, async (c) => {
  const userId = c.req.query('userId')?.trim()
  const [contact, reviewers] = await Promise.all([
    userId
      ? c.get('api')<Record<string, string | number | null>>('GET', `/v1/contacts/${encodeURIComponent(userId)}`)
      : undefined,
    c.get('api')<{ items: { userId: string; addedAt: string }[] }>('GET', '/v1/reviewers'),
  ])
  return c.html(
    <Layout page={c.get('page')} title="Contacts and reviewers">
      <form class="filters" method="get" action="/console/contacts">
        <label>
          User id
          <input type="search" name="userId" value={userId ?? ''} required />
        </label>
        <button type="submit">Look up</button>
      </form>
      {contact && contact.status !== 200 ? <ErrorNote error={contact.body.error} /> : null}
      {contact?.status === 200 ? (
        <dl>
          <dt>Address</dt>
          <dd>{maskAddress(String(contact.body.email ?? ''))}</dd>
          <dt>Locale</dt>
          <dd>{contact.body.locale ?? '—'}</dd>
          <dt>Time zone</dt>
          <dd>{contact.body.timeZone ?? '—'}</dd>
          <dt>Version</dt>
          <dd>{contact.body.version}</dd>
        </dl>
      ) : null}
      {c.get('operator').role === 'admin' ? (
        <p>
          <a
            class="button secondary"
            href={`/console/erasures${queryOf({ userId: contact?.status === 200 ? userId : undefined })}`}
          >
            {contact?.status === 200 ? 'Erase this recipient…' : 'Erase a recipient…'}
          </a>
        </p>
      ) : null}
      <h2>Reviewer pool</h2>
      <Table
        label="Reviewer pool"
        head={['User', 'Added']}
        rows={(reviewers.body.items ?? []).map((item) => [
          <a href={`/console/contacts${queryOf({ userId: item.userId })}`}>{item.userId}</a>,
          <Time at={item.addedAt} relative />,
        ])}
      />
    </Layout>,
  )
})

lookupPages.get('/audit', needsViewer, async (c) => {
  const filter = { action: c.req.query('action'), actor: c.req.query('actor'), target: c.req.query('target') }
  const answer = await c.get('api')<{ items: AuditRecord[]; nextCursor: string | null }>(
    'GET',
    `/v1/audit${queryOf({ ...filter, cursor: c.req.query('cursor'), limit: '50' })}`,
  )
  const config = configOf(c.env)
  const open = await openSessions(c.env.DB, new Date(), sessionLimits(config))
  const admin = c.get('operator').role === 'admin'
  return c.html(
    <Layout page={c.get('page')} title="Audit trail">
      <section aria-labelledby="sessions">
        <h2 id="sessions">Console sessions</h2>
        <p>
          {open} open (used in the last {config.CONSOLE_SESSION_IDLE_MINUTES} min, at most{' '}
          {config.CONSOLE_SESSION_HOURS} h after signing in).
        </p>
        {admin ? (
          <form method="post" action="/console/sessions/end-all">
            <Csrf page={c.get('page')} />
            <button type="submit" class="danger">
              Sign out everyone
            </button>{' '}
            Every session ends at once, yours too; behind Cloudflare Access, Access signs its users in again.
          </form>
        ) : null}
      </section>
      <h2>Changes</h2>
      <form class="filters" method="get" action="/console/audit">
        <TextFilter name="action" label="Action" value={filter.action} />
        <TextFilter name="actor" label="Actor" value={filter.actor} />
        <TextFilter name="target" label="Target" value={filter.target} />
        <button type="submit">Filter</button>
      </form>
      <ErrorNote error={answer.body.error} />
      <Table
        label="Audit trail"
        head={['At', 'Actor', 'Via', 'Action', 'Target', 'Affected', 'Parameters']}
        numeric={[5]}
        rows={(answer.body.items ?? []).map((row) => [
          <Time at={row.at} relative />,
          row.actor,
          row.via,
          <code>{row.action}</code>,
          row.target ?? '',
          row.affected,
          <code>{JSON.stringify(row.parameters)}</code>,
        ])}
      />
      {answer.body.nextCursor ? (
        <p>
          <a href={`/console/audit${queryOf({ ...filter, cursor: answer.body.nextCursor })}`}>Older</a>
        </p>
      ) : null}
    </Layout>,
    answer.status === 200 ? 200 : 400,
  )
})
