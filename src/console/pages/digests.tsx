/**
 * Digests in the console, as the API shows them (src/api/routes/digest-views.ts):
 * on an event's story and a digested notification's page, the digest it went
 * into and that digest's email; on a digest's page, the events it tells; on
 * the overview, digests by kind from the counters. No address, name or
 * content: the digest's own page masks those as any notification's page does.
 */
import { COUNTERS } from '../../metrics/counters.ts'
import { Table } from '../layout.tsx'
import { Time } from '../time.tsx'

/** The digest a notification went into (`inDigest`). */
export type DigestReference = {
  id: string
  status: string
  statusReason: string | null
  errorCode: string | null
  scheduledAt: string
  sentAt: string | null
  providerId: string | null
  deliveryStatus: string | null
  size: number
  closesAt: string | null
  sentMessage: { transport: string; messageId: string; sentAt: string } | null
}

/** A digest's events (`digest`). */
export type DigestEvents = {
  size: number
  closesAt: string | null
  events: { eventId: string; notificationId: string; kind: string; createdAt: string }[]
}

const digestHref = (id: string) => `/console/notifications/${encodeURIComponent(id)}`
const eventHref = (id: string) => `/console/events/${encodeURIComponent(id)}`

/** When a digest closes (how long it still waits), or what became of its email once closed. */
function DigestTime(props: { digest: DigestReference }) {
  const { digest } = props
  if (digest.closesAt) {
    return (
      <>
        closes <Time at={digest.closesAt} relative />
      </>
    )
  }
  if (digest.sentAt) {
    return (
      <>
        sent <Time at={digest.sentAt} />
        {digest.deliveryStatus ? `, ${digest.deliveryStatus}` : ''}
      </>
    )
  }
  return (
    <>
      due <Time at={digest.scheduledAt} />
    </>
  )
}

/** A digest in a line, for a digested notification's page: its link, status, size, time and email. */
export function DigestLine(props: { digest: DigestReference }) {
  const { digest } = props
  return (
    <>
      <a href={digestHref(digest.id)}>{digest.id}</a>: <strong>{digest.status}</strong>, {digest.size} notification(s),{' '}
      <DigestTime digest={digest} />
      {digest.providerId ? (
        <>
          , provider id <code>{digest.providerId}</code>
        </>
      ) : null}
      {digest.errorCode ? (
        <>
          {' '}
          <code>{digest.errorCode}</code> {digest.statusReason ?? ''}
        </>
      ) : null}
    </>
  )
}

/** The Timeline cell of a digested notification in its story: told in which digest. */
export function ToldIn(props: { createdAt: string; digest: DigestReference }) {
  return (
    <>
      created <Time at={props.createdAt} /> → told in <a href={digestHref(props.digest.id)}>{props.digest.id}</a>
    </>
  )
}

/** The story's table of the digests its notifications went into: each one's status, size, time and email. */
export function StoryDigests(props: { digests: DigestReference[] }) {
  const unique = [...new Map(props.digests.map((digest) => [digest.id, digest])).values()]
  if (unique.length === 0) return null
  return (
    <>
      <h2>Digests</h2>
      <p>
        A <code>digested</code> notification had no email of its own: it was told in its recipient's digest, and the
        digest's email is the one it went out in.
      </p>
      <Table
        label="Digests of the event"
        head={['Digest', 'Status', 'Notifications', 'Closes / sent', 'Provider id', 'Message-ID', 'Reason']}
        numeric={[2]}
        rows={unique.map((digest) => [
          <a href={digestHref(digest.id)}>{digest.id}</a>,
          <strong>{digest.status}</strong>,
          digest.size,
          <DigestTime digest={digest} />,
          digest.providerId ? <code>{digest.providerId}</code> : '',
          digest.sentMessage ? <code>{digest.sentMessage.messageId}</code> : '',
          digest.statusReason ?? '',
        ])}
      />
    </>
  )
}

/** A digest's page: how many events it tells, when it closes, and the events, each linked to its story. */
export function DigestEventsSection(props: { digest: DigestEvents }) {
  const { size, closesAt, events } = props.digest
  return (
    <>
      <h2>Events told ({size})</h2>
      <p id="digest-events">
        {closesAt ? (
          <>
            Collecting: it closes <Time at={closesAt} relative />; events that arrive until then join it.{' '}
          </>
        ) : null}
        {events.length < size ? `The oldest ${events.length} of ${size}.` : null}
      </p>
      <Table
        label="Events told in the digest"
        head={['#', 'Event', 'Kind', 'Created']}
        numeric={[0]}
        rows={events.map((event, index) => [
          index + 1,
          <a href={eventHref(event.eventId)}>{event.eventId}</a>,
          <a href={digestHref(event.notificationId)}>{event.kind}</a>,
          <Time at={event.createdAt} />,
        ])}
      />
    </>
  )
}

/**
 * Digests by kind since the counters began: notifications told in one
 * (`notify_notifications_total{status="digested"}`) and digest emails opened,
 * sent and failed (`notify_digests_total`), summed over channels.
 */
export function digestCounts(db: D1Database): D1PreparedStatement {
  const status = "json_extract(labels, '$.status')"
  return db
    .prepare(
      `SELECT json_extract(labels, '$.kind') AS kind,
         sum(CASE WHEN name = ?1 THEN value ELSE 0 END) AS digested,
         sum(CASE WHEN name = ?2 AND ${status} = 'collecting' THEN value ELSE 0 END) AS opened,
         sum(CASE WHEN name = ?2 AND ${status} = 'sent' THEN value ELSE 0 END) AS sent,
         sum(CASE WHEN name = ?2 AND ${status} = 'failed' THEN value ELSE 0 END) AS failed
       FROM counters WHERE (name = ?1 AND ${status} = 'digested') OR name = ?2
       GROUP BY kind ORDER BY kind`,
    )
    .bind(COUNTERS.notifications, COUNTERS.digests)
}

/** The overview's card of `digestCounts`. */
export function DigestsCard(props: { rows: Record<string, string | number | null>[] }) {
  return (
    <section class="card" aria-labelledby="digests">
      <h2 id="digests">Digests by kind</h2>
      <Table
        label="Digests by kind, since the counters began"
        head={['Kind', 'Digested', 'Opened', 'Sent', 'Failed']}
        numeric={[1, 2, 3, 4]}
        rows={props.rows.map((row) => [row.kind, row.digested, row.opened, row.sent, row.failed])}
      />
    </section>
  )
}
