/**
 * Cancelling a key from the console: the event story offers each of its
 * notifications' cancellation keys; this page asks to confirm (what the key
 * withdraws, as a dry run finds it), then cancels it through the API
 * (POST /v1/cancellations: its checks, roles and audit trail) and shows what
 * became of each notification.
 */
import { Hono } from 'hono'
import type { CancelReport } from '../../cancel/cancel-key.ts'
import type { ConsoleEnv } from '../context.ts'
import { Csrf, ErrorNote, Layout, Table } from '../layout.tsx'
import { needsAdmin, needsViewer } from '../page-roles.ts'
import { Time } from '../time.tsx'

export const cancellationPages = new Hono<ConsoleEnv>()

cancellationPages.get('/', needsViewer, async (c) => {
  const key = c.req.query('key') ?? ''
  const back = c.req.query('event')
  const found = await c.get('api')<{ keys: { key: string; waiting: number }[] }>('POST', '/v1/cancellations/bulk', {
    filter: { keyPrefix: key },
  })
  // The count is an admin's dry run (a viewer, who cannot cancel, is not shown one).
  const waiting = found.status === 200 ? (found.body.keys.find((entry) => entry.key === key)?.waiting ?? 0) : undefined
  return c.html(
    <Layout page={c.get('page')} title="Cancel this key?">
      <p>
        Withdraws every notification of <code>{key}</code> that has not gone out
        {waiting === undefined ? '' : ` (${waiting} now)`}, and the in-app items already shown; an event of the key that
        comes later creates nothing. An email being sent right now still goes.
      </p>
      <form method="post" action="/console/cancellations">
        <Csrf page={c.get('page')} />
        <input type="hidden" name="key" value={key} />
        <label>
          Reason
          <input name="reason" maxlength={500} />
        </label>
        <div class="actions">
          <button type="submit" class="danger">
            Cancel the key
          </button>
          {back ? (
            <a class="button secondary" href={`/console/events/${encodeURIComponent(back)}`}>
              Back to the event
            </a>
          ) : null}
        </div>
      </form>
    </Layout>,
  )
})

cancellationPages.post('/', needsAdmin, async (c) => {
  const form = (await c.req.parseBody()) as Record<string, string>
  const answer = await c.get('api')<CancelReport>('POST', '/v1/cancellations', {
    key: form.key,
    ...(form.reason ? { reason: form.reason } : {}),
  })
  if (answer.status !== 200) {
    return c.html(
      <Layout page={c.get('page')} title="Not done">
        <ErrorNote error={answer.body.error} />
      </Layout>,
      answer.status >= 500 ? 503 : 400,
    )
  }
  const report = answer.body
  return c.html(
    <Layout page={c.get('page')} title="Cancelled">
      <p>
        <code>{report.key}</code> is cancelled (first <Time at={report.cancelledAt} />, by {report.source}).
      </p>
      <Table
        label="What the cancellation did"
        head={['Notification', 'Kind', 'Channel', 'Recipient (user)', 'Status', 'Outcome']}
        rows={report.notifications.map((n) => [
          <a href={`/console/notifications/${encodeURIComponent(n.id)}`}>{n.id}</a>,
          n.kind,
          n.channel,
          <code>{n.recipientUserId}</code>,
          <strong>{n.status}</strong>,
          n.unconfirmedThrough.length === 0
            ? n.outcome
            : `${n.outcome}; a try through ${n.unconfirmedThrough.join(' and ')} may have gone out`,
        ])}
      />
    </Layout>,
  )
})
