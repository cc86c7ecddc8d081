/**
 * The demo's cancel by key (docs/operating.md, "Cancelling"): an invitation
 * to a specialist who lives where it is night now, so that its email waits
 * for the quiet hours to end there — `npm start`'s .dev.vars holds normal
 * urgency, an invitation's, in quiet hours (QUIET_HOURS_URGENCIES) — and
 * then the client withdraws the invitation: invitation.withdrawn, through
 * RabbitMQ as the invitation came. The email ends `cancelled`, never sent,
 * and the invitation's story says so.
 */
import { readFileSync } from 'node:fs'
import { localClock } from '../support/time-zones.ts'
import { api, type Endpoints, publishInvitation, until } from './demo-lib.ts'
import { newRecipient } from './demo-recipients.ts'

/** A notification of an event's story (GET /v1/events/{eventId}), as this step shows it. */
export type StoryRow = {
  id: string
  channel: string
  status: string
  statusReason: string | null
  scheduledAt: string
  claimedAt: string | null
  sentAt: string | null
  sendAttempts: number
  providerId: string | null
}

/** What the step showed. */
export type WithdrawnShown = {
  invitee: { userId: string; email: string; timeZone: string; localTime: string }
  invitationEventId: string
  withdrawalEventId: string
  /** The invitation's outcome (`enqueued`: its notifications were written). */
  created: string | undefined
  /** The invitation's email before the withdrawal came: pending, due when the quiet hours end. */
  held: StoryRow | undefined
  /** The withdrawal's outcome (`cancellation`). */
  withdrawal: string | undefined
  /** The invitation's notifications after it. */
  after: StoryRow[]
}

const example = (name: string) => JSON.parse(readFileSync(`examples/arthunt/${name}.json`, 'utf8'))

/** The event's story: its outcomes and notifications, once it has one. */
async function storyOf(endpoints: Endpoints, eventId: string) {
  const { status, body } = await api(endpoints, `/v1/events/${eventId}`)
  if (status !== 200 || !body) return undefined
  return {
    outcomes: (body.processed as { outcome: string }[]).map((processed) => processed.outcome),
    notifications: body.notifications as StoryRow[],
  }
}

/**
 * Whether the invitation's email has come to where this step reads it: held (pending, due more than a
 * minute from now), or anything but about to go (sent, or ended otherwise).
 */
function planned(email: StoryRow | undefined): boolean {
  if (!email) return false
  if (email.status === 'pending') return Date.parse(email.scheduledAt) > Date.now() + 60_000
  return !['sending', 'collecting', 'closing', 'escalating'].includes(email.status)
}

/**
 * An invitation to a new specialist living in `nightZone` (a zone where it is night now), withdrawn while
 * its email waits for the morning there; what its story says before and after.
 */
export async function showWithdrawn(
  endpoints: Endpoints,
  nightZone: string,
  timeoutMs = 90_000,
): Promise<WithdrawnShown> {
  const person = await newRecipient(endpoints, 'withdrawn', nightZone)
  const localTime = localClock(nightZone)
  const invitation = example('invitation.created')
  invitation.envelope.eventId = crypto.randomUUID()
  invitation.envelope.occurredAt = new Date().toISOString()
  invitation.data.invitationId = crypto.randomUUID()
  invitation.data.projectId = crypto.randomUUID()
  invitation.data.recipient = { ...invitation.data.recipient, ...person }
  await publishInvitation(endpoints, invitation)
  const before = await until(async () => {
    const story = await storyOf(endpoints, invitation.envelope.eventId)
    const email = story?.notifications.find((row) => row.channel === 'email')
    return planned(email) ? { created: story?.outcomes[0], email } : undefined
  }, timeoutMs)

  // The client withdraws it, before the morning comes there.
  const withdrawn = example('invitation.withdrawn')
  withdrawn.envelope.eventId = crypto.randomUUID()
  withdrawn.envelope.occurredAt = new Date().toISOString()
  withdrawn.data.invitationId = invitation.data.invitationId
  await publishInvitation(endpoints, withdrawn)
  const withdrawal = await until(
    async () => (await storyOf(endpoints, withdrawn.envelope.eventId))?.outcomes[0],
    timeoutMs,
  )
  // The invitation's notifications as they stand once the withdrawal is done (each cancelled, if it worked).
  let after: StoryRow[] = []
  await until(async () => {
    after = (await storyOf(endpoints, invitation.envelope.eventId))?.notifications ?? after
    return after.length > 0 && after.every((row) => row.status === 'cancelled') ? true : undefined
  }, 10_000)
  return {
    invitee: { ...person, timeZone: nightZone, localTime },
    invitationEventId: invitation.envelope.eventId,
    withdrawalEventId: withdrawn.envelope.eventId,
    created: before?.created,
    held: before?.email,
    withdrawal,
    after,
  }
}
