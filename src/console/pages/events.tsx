/**
 * An event's story (found by event id or source message id; a digested
 * notification names its digest) and one notification (a digest lists the
 * events it tells): its recipient masked and its content hidden until an operator
 * reveals them (audited), its email in a sandboxed frame that can run nothing
 * and load nothing (an audited read too), and the raw MIME to download
 * (audited: it holds the address).
 */
import { Hono } from 'hono'
import { rowsEverywhere } from '../../d1/shards.ts'
import { LEGACY_MARKS } from '../../materialize/processed.ts'
import type { ConsoleContext, ConsoleEnv } from '../context.ts'
import { Csrf, ErrorNote, Layout, Table } from '../layout.tsx'
import { needsViewer } from '../page-roles.ts'
import { Time } from '../time.tsx'
import {
  type DigestEvents,
  DigestEventsSection,
  DigestLine,
  type DigestReference,
  StoryDigests,
  ToldIn,
} from './digests.tsx'

type NotificationSummary = {
  id: string
  kind: string
  channel: string
  recipientUserId: string
  status: string
  statusReason: string | null
  deliveryStatus: string | null
  deliveryAt: string | null
  scheduledAt: string
  sentAt: string | null
  createdAt: string
  inDigest: DigestReference | null
  /** A sent in-app notification's item in its feed (the story's; a notification's own page has none). */
  inFeed?: InFeed | null
  /** An email that waits, or waited, for its in-app item (the story's: with the mark and which came first). */
  escalation?: {
    unless: string
    decidedAt: string | null
    markedAt?: string | null
    first?: 'mark' | 'email' | null
  } | null
  cancellationKey?: string | null
}
/** When the recipient saw, read and archived an in-app item (null: not yet). */
type InFeed = { seenAt: string | null; readAt: string | null; archivedAt: string | null }
type Story = {
  eventId: string
  processed: {
    eventType: string
    kind: string | null
    source: string
    origin: string
    sourceMessageId: string
    outcome: string
    receivedAt: string
    processedAt: string
  }[]
  notifications: NotificationSummary[]
  deadLetters: { id: string; code: string; status: string; queue: string; firstSeen: string; error: string }[]
}
type Notification = NotificationSummary & {
  eventId: string
  recipientEmail: string | null
  recipientName: string | null
  subject: string | null
  text: string | null
  html: string | null
  errorCode: string | null
  timeline: { provider: string; type: string; status: string; occurredAt: string }[]
  sentMessage: { transport: string; messageId: string; sentAt: string; raw?: string } | null
  contentRemoved: { at: string; by: 'retention' | 'erasure' } | null
  digest: DigestEvents | null
}

/** The event id of a source message id, from what was processed or dead-lettered, in any D1 shard. */
async function eventOfMessage(env: Env, messageId: string): Promise<string | undefined> {
  const [found = []] = await rowsEverywhere(env, (db) => [
    db
      .prepare(
        `SELECT event_id FROM processed_marks WHERE source_message_id = ?1
         UNION ALL SELECT event_id FROM ${LEGACY_MARKS} WHERE source_message_id = ?1
         UNION ALL SELECT event_id FROM dead_letters WHERE source_message_id = ?1 AND event_id IS NOT NULL LIMIT 1`,
      )
      .bind(messageId),
  ])
  const row = found[0] as { event_id: string } | undefined
  return row?.event_id
}

/** A notification's status over time: created, scheduled, sent, then what the provider reported. */
function Timeline(props: { n: NotificationSummary }) {
  const { n } = props
  return (
    <>
      created <Time at={n.createdAt} /> → due <Time at={n.scheduledAt} /> →{' '}
      {n.sentAt ? (
        <>
          sent <Time at={n.sentAt} />
        </>
      ) : (
        `now ${n.status}`
      )}
      {n.deliveryStatus ? (
        <>
          {' '}
          → {n.deliveryStatus} <Time at={n.deliveryAt} />
        </>
      ) : null}
      {n.channel === 'in-app' && n.status === 'sent' && n.inFeed !== undefined ? <FeedMarks item={n.inFeed} /> : null}
      {n.escalation ? <Escalated escalation={n.escalation} /> : null}
    </>
  )
}

/** An escalated email: when the feed decided, the item's mark, and which came first. */
function Escalated(props: { escalation: NonNullable<NotificationSummary['escalation']> }) {
  const { unless, decidedAt, markedAt, first } = props.escalation
  if (decidedAt === null) return <> → waits for its in-app item to go un{unless}</>
  return (
    <>
      {' → '}
      {first === 'mark' ? `its item was ${unless} first` : 'escalated'}
      {markedAt ? (
        <>
          {' '}
          ({unless} <Time at={markedAt} />, decided <Time at={decidedAt} />)
        </>
      ) : (
        <>
          {' '}
          (decided <Time at={decidedAt} />, not {unless})
        </>
      )}
    </>
  )
}

/**
 * What the recipient did with an in-app item — "seen 12:01, read 12:03" — or
 * that its feed no longer holds it (erased, or past the inbox's retention).
 */
function FeedMarks(props: { item: InFeed | null }) {
  const { item } = props
  if (!item) return <> → no longer in the feed</>
  const marks = (
    [
      ['seen', item.seenAt],
      ['read', item.readAt],
      ['archived', item.archivedAt],
    ] as const
  ).filter(([, at]) => at !== null)
  if (marks.length === 0) return <> → not seen yet</>
  return (
    <>
      {' → '}
      {marks.map(([mark, at], index) => (
        <>
          {index > 0 ? ', ' : ''}
          {mark} <Time at={at} />
        </>
      ))}
    </>
  )
}

/** The event's cancellation keys, each with a link to cancel it (the page asks to confirm). */
function Cancellable(props: { eventId: string; keys: string[] }) {
  const keys = [...new Set(props.keys)]
  if (keys.length === 0) return null
  return (
    <>
      <h2>Cancellation</h2>
      <ul>
        {keys.map((key) => (
          <li>
            <code>{key}</code>{' '}
            <a
              class="button secondary"
              href={`/console/cancellations?key=${encodeURIComponent(key)}&event=${encodeURIComponent(props.eventId)}`}
            >
              Cancel…
            </a>
          </li>
        ))}
      </ul>
    </>
  )
}

export const eventPages = new Hono<ConsoleEnv>()

eventPages.get('/events', needsViewer, async (c) => {
  const q = c.req.query('q')?.trim()
  if (q) {
    const found = await c.get('api')('GET', `/v1/events/${encodeURIComponent(q)}`)
    const eventId = found.status === 200 ? q : await eventOfMessage(c.env, q)
    if (eventId) return c.redirect(`/console/events/${encodeURIComponent(eventId)}`, 303)
  }
  return c.html(
    <Layout page={c.get('page')} title="Event stories">
      <form class="filters" method="get" action="/console/events">
        <label>
          Event id or source message id
          <input type="search" name="q" value={q ?? ''} required />
        </label>
        <button type="submit">Find</button>
      </form>
      {q ? (
        <p class="note" role="status">
          No event with the id or source message id {q}.
        </p>
      ) : null}
    </Layout>,
    q ? 404 : 200,
  )
})

eventPages.get('/events/:eventId', needsViewer, async (c) => {
  const eventId = c.req.param('eventId')
  const answer = await c.get('api')<Story>('GET', `/v1/events/${encodeURIComponent(eventId)}`)
  if (answer.status !== 200) {
    return c.html(
      <Layout page={c.get('page')} title="No such event">
        <ErrorNote error={answer.body.error} />
      </Layout>,
      404,
    )
  }
  const story = answer.body
  return c.html(
    <Layout page={c.get('page')} title={`Event ${eventId}`}>
      <h2>Where it came from</h2>
      <Table
        label="Processing"
        head={['Outcome', 'Type', 'Kind', 'Source', 'Origin', 'Message id', 'Received', 'Processed']}
        rows={story.processed.map((p) => [
          <strong>{p.outcome}</strong>,
          p.eventType,
          p.kind ?? '',
          p.source,
          <code>{p.origin}</code>,
          <code>{p.sourceMessageId}</code>,
          <Time at={p.receivedAt} />,
          <Time at={p.processedAt} />,
        ])}
      />
      <h2>Notifications</h2>
      <Table
        label="Notifications"
        head={['Kind', 'Channel', 'Recipient (user)', 'Status', 'Timeline', 'Reason']}
        rows={story.notifications.map((n) => [
          <a href={`/console/notifications/${encodeURIComponent(n.id)}`}>{n.kind}</a>,
          n.channel,
          <code>{n.recipientUserId}</code>,
          <strong>{n.status}</strong>,
          n.inDigest ? <ToldIn createdAt={n.createdAt} digest={n.inDigest} /> : <Timeline n={n} />,
          n.statusReason ?? '',
        ])}
      />
      <StoryDigests digests={story.notifications.flatMap((n) => (n.inDigest ? [n.inDigest] : []))} />
      <Cancellable
        eventId={eventId}
        keys={story.notifications.flatMap((n) => (n.cancellationKey ? [n.cancellationKey] : []))}
      />
      <h2>Dead letters</h2>
      <Table
        label="Dead letters of the event"
        head={['First seen', 'Code', 'Status', 'Queue', 'Error']}
        rows={story.deadLetters.map((d) => [
          <a href={`/console/dead-letters/${encodeURIComponent(d.id)}`}>
            <Time at={d.firstSeen} />
          </a>,
          <code>{d.code}</code>,
          d.status,
          d.queue,
          d.error.slice(0, 140),
        ])}
      />
    </Layout>,
  )
})

/** What the notification page asks the API for: masked, everything revealed (with the raw MIME), or the HTML alone. */
type Read = 'masked' | 'revealed' | 'raw' | 'html'

const READ_QUERY: Record<Read, string> = {
  masked: '',
  revealed: '?reveal=true',
  raw: '?raw=true',
  html: '?reveal=html',
}

// Every unmasked read goes through the API's reveal, which writes its audit row: the console adds
// none of its own, so each read is one row whoever makes it and however.
async function notificationOf(c: ConsoleContext, read: Read) {
  const id = c.req.param('id') as string
  return c.get('api')<Notification>('GET', `/v1/notifications/${encodeURIComponent(id)}${READ_QUERY[read]}`)
}

type NotificationProps = { c: ConsoleContext; n: Notification; revealed: boolean }

/** A notification: what it is and where it stands, the events of its digest, its provider events, and the email. */
function NotificationPage(props: NotificationProps) {
  const { n, c } = props
  return (
    <Layout page={c.get('page')} title={`${n.digest ? 'Digest' : 'Notification'} ${n.kind}`}>
      <NotificationFacts {...props} />
      {n.digest ? <DigestEventsSection digest={n.digest} /> : null}
      <h2>Provider events</h2>
      <Table
        label="Provider events"
        head={['At', 'Provider', 'Type', 'Status']}
        rows={n.timeline.map((event) => [<Time at={event.occurredAt} />, event.provider, event.type, event.status])}
      />
      <TheEmail {...props} />
    </Layout>
  )
}

/** What the notification tells of (an event, or a digest's events), its status, delivery, recipient and timeline. */
function NotificationFacts(props: NotificationProps) {
  const { n } = props
  return (
    <dl>
      {n.digest ? (
        <>
          <dt>Digest of</dt>
          <dd>{n.digest.size} event(s), listed below</dd>
        </>
      ) : (
        <>
          <dt>Event</dt>
          <dd>
            <a href={`/console/events/${encodeURIComponent(n.eventId)}`}>{n.eventId}</a>
          </dd>
        </>
      )}
      {n.inDigest ? (
        <>
          <dt>Told in digest</dt>
          <dd>
            <DigestLine digest={n.inDigest} />
          </dd>
        </>
      ) : null}
      <dt>Status</dt>
      <dd>
        {n.status} {n.statusReason ? `— ${n.statusReason}` : ''} {n.errorCode ? <code>{n.errorCode}</code> : null}
      </dd>
      <dt>Delivery</dt>
      <dd>{n.deliveryStatus ?? 'no report yet'}</dd>
      <dt>Recipient</dt>
      <dd>
        <Recipient {...props} />
      </dd>
      <dt>Subject</dt>
      <dd>{props.revealed ? (n.subject ?? '') : 'shown when revealed'}</dd>
      <dt>Timeline</dt>
      <dd>
        <Timeline n={n} />
      </dd>
    </dl>
  )
}

/** The recipient, masked until revealed (a POST, recorded), or why it is gone. */
function Recipient(props: NotificationProps) {
  const { n, c } = props
  return (
    <>
      {n.contentRemoved ? (
        <p id="content-removed">
          The recipient and the content were removed by {n.contentRemoved.by === 'erasure' ? 'an erasure' : 'retention'}{' '}
          on <Time at={n.contentRemoved.at} />.
        </p>
      ) : null}
      {n.recipientName ? `${n.recipientName} <${n.recipientEmail ?? ''}>` : (n.recipientEmail ?? '')}
      {props.revealed ? null : (
        <form method="post" action={`/console/notifications/${encodeURIComponent(n.id)}/reveal`}>
          <Csrf page={c.get('page')} />
          <button type="submit" class="secondary">
            Reveal the address and the email (recorded in the audit trail)
          </button>
        </form>
      )}
    </>
  )
}

/** The email as rendered (its HTML in a sandboxed frame, its text part) once revealed, and its raw MIME to download. */
function TheEmail(props: NotificationProps) {
  const { n, c } = props
  const id = encodeURIComponent(n.id)
  return (
    <>
      <h2>The email</h2>
      {!props.revealed ? (
        <p>The email is shown when you reveal the address: it is addressed to the recipient by name.</p>
      ) : n.html ? (
        // The frame loads the HTML through its own audited read (`notification.html`).
        <iframe title="The rendered email" sandbox="" src={`/console/notifications/${id}/frame`} />
      ) : (
        <p>Nothing rendered.</p>
      )}
      {props.revealed ? (
        <>
          <h2>Text part</h2>
          <pre>{n.text ?? ''}</pre>
        </>
      ) : null}
      {n.sentMessage ? (
        <form method="post" action={`/console/notifications/${id}/reveal`}>
          <Csrf page={c.get('page')} />
          <input type="hidden" name="raw" value="1" />
          <button type="submit" class="secondary">
            Download the raw MIME (recorded in the audit trail)
          </button>
        </form>
      ) : null}
    </>
  )
}

eventPages.get('/notifications/:id', needsViewer, async (c) => {
  const answer = await notificationOf(c, 'masked')
  if (answer.status !== 200) return c.notFound()
  return c.html(<NotificationPage c={c} n={answer.body} revealed={false} />)
})

// A POST, not a link: revealing is recorded, and a prefetching browser or a crawler must not do it.
// It only reads, so a viewer may.
eventPages.post('/notifications/:id/reveal', needsViewer, async (c) => {
  const form = (await c.req.parseBody()) as Record<string, string>
  const raw = form.raw === '1'
  const answer = await notificationOf(c, raw ? 'raw' : 'revealed')
  if (answer.status !== 200) return c.notFound()
  if (raw) {
    c.header('content-disposition', `attachment; filename="${answer.body.id.replace(/[^\w.-]/g, '_')}.eml"`)
    return c.body(answer.body.sentMessage?.raw ?? '', 200, { 'content-type': 'message/rfc822' })
  }
  return c.html(<NotificationPage c={c} n={answer.body} revealed={true} />)
})

// The email's HTML alone, for the frame: a policy that lets it load nothing and run nothing
// (and the frame's own sandbox besides), framed by the console's own pages only: elsewhere a
// revealed email would be a page another site could frame.
eventPages.get('/notifications/:id/frame', needsViewer, async (c) => {
  const answer = await notificationOf(c, 'html')
  if (answer.status !== 200) return c.notFound()
  c.header(
    'content-security-policy',
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox; frame-ancestors 'self'",
  )
  return c.html(answer.body.html ?? '')
})
