/**
 * `notify-edge smoke --to ADDRESS`: after a deploy, one test event through
 * the Worker's own ingest, followed hop by hop through the operator API until
 * the provider reports it delivered, or until it stalls — and then which hop
 * stalled and what the Worker's own configuration check says about it.
 */
import { randomUUID } from 'node:crypto'
import { FINAL_STATUSES } from '../src/notifications/status.ts'
import { maskAddress } from '../src/privacy.ts'
import type { Client } from './client.ts'

/** The hops of one event's story, in order. */
export const HOPS = ['accepted', 'materialized', 'claimed', 'sent', 'delivered'] as const
export type Hop = (typeof HOPS)[number]

/** What the smoke test saw of one hop: when (the Worker's own time where it records one) and a detail. */
export type HopReport = { hop: Hop; at: string; detail: string }

/** A finding of the Worker's configuration check (`GET /v1/health/config`). */
type Finding = { id: string; severity: string; message: string; fix: string }

type Notification = {
  id: string
  status: string
  statusReason: string | null
  errorCode: string | null
  createdAt: string
  claimedAt: string | null
  sentAt: string | null
  providerId: string | null
  /** The transport that sent it; null until sent. */
  transport: string | null
  deliveryStatus: string | null
  deliveryAt: string | null
  sendAttempts: number
}

/** Statuses after which nothing more happens to the notification without an operator (sent is a hop). */
const ENDED = new Set<string>(FINAL_STATUSES.filter((status) => status !== 'sent'))
/** Statuses in which it waits for something the smoke test cannot bring about: said at once, not waited out. */
const WAITING = new Set(['paused', 'awaiting-contact'])

/**
 * The smoke test's own event: an ArtHunt `invitation.created` addressed to
 * `to`, with fresh ids — a kind that goes at once (a response would wait for
 * its owner's digest to close, ten minutes when deployed).
 */
export function smokeEvent(to: string, now = new Date()) {
  const eventId = randomUUID()
  const body = {
    envelope: {
      eventId,
      eventType: 'invitation.created',
      schemaVersion: 1,
      occurredAt: now.toISOString(),
      producer: 'notify-edge-smoke',
    },
    data: {
      invitationId: randomUUID(),
      projectId: randomUUID(),
      projectTitle: 'notify-edge smoke test',
      recipient: { userId: randomUUID(), email: to, displayName: 'notify-edge smoke' },
      actor: { userId: randomUUID(), displayName: 'notify-edge' },
      message: 'notify-edge smoke test',
      deepLink: 'https://example.com/notify-edge-smoke',
    },
  }
  return {
    eventId,
    inbound: {
      source: 'http' as const,
      origin: 'http:notify-edge smoke',
      sourceMessageId: eventId,
      receivedAt: now.toISOString(),
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    },
  }
}

/** Options of one smoke run. */
export type SmokeOptions = {
  to: string
  /** How long to wait for each hop, in ms. */
  hopTimeoutMs: number
  /** Ingest with the ingest token (the bridge's); everything else with the admin token. */
  ingest: (body: unknown) => Promise<unknown>
  api: Client
  /** Whether the Worker is `wrangler dev` on this machine, whose send_email binding emits no delivery events. */
  local: boolean
  print: (line: string) => void
  pollMs?: number
}

/** What a smoke run saw: the hops reached, and where it stalled (with the findings) if it did. */
export type SmokeReport = {
  eventId: string
  hops: HopReport[]
  stalled?: { hop: Hop; why: string; findings: Finding[] }
}

/**
 * Runs the smoke test and prints each hop as it is reached. Resolves to the
 * exit status — 0 when every hop the transport can report was reached, 1 on a
 * stall or an ended notification — and the report.
 */
export async function smoke(options: SmokeOptions): Promise<{ code: number; report: SmokeReport }> {
  const started = Date.now()
  const poll = options.pollMs ?? 500
  const { eventId, inbound } = smokeEvent(options.to)
  const report: SmokeReport = { eventId, hops: [] }
  const line = (hop: Hop, at: string, detail: string) => {
    report.hops.push({ hop, at, detail })
    const elapsed = ((Date.parse(at) - started) / 1000).toFixed(1)
    options.print(`  ✓ ${hop.padEnd(13)} ${at}  +${elapsed.padStart(5)} s  ${detail}`)
  }
  const stalled = async (hop: Hop, why: string) => {
    report.stalled = { hop, why, findings: await explain(options, hop, why) }
    return { code: 1, report }
  }
  // Masked: what the command prints ends up in terminals' scrollback and CI logs.
  options.print(`smoke: event ${eventId} (invitation.created) to ${maskAddress(options.to)}`)
  await options.ingest({ events: [inbound] })
  line('accepted', new Date().toISOString(), 'POST /v1/ingest answered 202: the event is on notify-events')

  let notification: Notification | undefined
  let transport: string | undefined
  let reached: Hop = 'accepted'
  const next = (): Hop | undefined => HOPS[HOPS.indexOf(reached) + 1]
  let deadline = Date.now() + options.hopTimeoutMs
  while (next()) {
    const hop = next() as Hop
    // 404 until the consumer has processed it: nothing is known about the event yet.
    const story = (await options.api.get(`/v1/events/${eventId}`).catch((error: Error) => {
      if (error.message.startsWith('404 ')) return { processed: [], notifications: [], deadLetters: [] }
      throw error
    })) as {
      processed: { outcome: string }[]
      notifications: Notification[]
      deadLetters: { code: string; error: string }[]
    }
    const dead = story.deadLetters[0]
    if (dead) return stalled(hop, `the event was dead-lettered: ${dead.code} — ${dead.error}`)
    notification = story.notifications[0]
    if (hop === 'materialized' && notification) {
      line(hop, notification.createdAt, `notification ${notification.id} (${notification.status})`)
      reached = hop
    } else if (hop === 'claimed' && notification?.claimedAt) {
      line(hop, notification.claimedAt, `attempt ${notification.sendAttempts}`)
      reached = hop
    } else if (hop === 'sent' && notification?.status === 'sent' && notification.sentAt) {
      transport = notification.transport ?? undefined
      line(hop, notification.sentAt, `through ${transport ?? 'the transport'}, provider id ${notification.providerId}`)
      reached = hop
      if (transport === 'cloudflare' && options.local) {
        options.print(
          '  – delivered     not reported here: the local send_email binding (wrangler dev) emits no delivery events; deployed, they arrive through the notify-email-events subscription',
        )
        return { code: 0, report }
      }
    } else if (hop === 'delivered' && notification?.deliveryStatus) {
      if (notification.deliveryStatus !== 'delivered') {
        return stalled(hop, `the provider reported ${notification.deliveryStatus}`)
      }
      line(hop, notification.deliveryAt ?? new Date().toISOString(), 'the provider reported it delivered')
      reached = hop
    }
    if (reached === hop) {
      deadline = Date.now() + options.hopTimeoutMs
      continue
    }
    if (notification && ENDED.has(notification.status)) {
      return stalled(hop, `the notification ended ${notification.status}: ${reasonOf(notification)}`)
    }
    if (notification && WAITING.has(notification.status)) {
      return stalled(hop, `the notification is ${notification.status}: ${reasonOf(notification)}`)
    }
    if (Date.now() > deadline) {
      const status = notification ? ` (status ${notification.status}: ${reasonOf(notification)})` : ''
      return stalled(hop, `nothing after ${Math.round(options.hopTimeoutMs / 1000)} s${status}`)
    }
    await new Promise((resolve) => setTimeout(resolve, poll))
  }
  options.print(`smoke: every hop in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  return { code: 0, report }
}

function reasonOf(notification: Notification): string {
  return [notification.errorCode, notification.statusReason].filter(Boolean).join(' ') || 'no reason recorded'
}

/** Prints the stalled hop and the configuration check's findings that may explain it. */
async function explain(options: SmokeOptions, hop: Hop, why: string): Promise<Finding[]> {
  options.print(`  ✗ ${hop.padEnd(13)} stalled: ${why}`)
  const findings = await options.api.get('/v1/health/config').then(
    (answer) => (answer as { findings: Finding[] }).findings,
    (error: Error) => {
      options.print(`  (the configuration check could not be read: ${error.message})`)
      return [] as Finding[]
    },
  )
  const relevant = findings.filter((finding) => finding.severity !== 'info')
  if (relevant.length === 0 && findings.length > 0) options.print('  the configuration check finds nothing blocking')
  for (const finding of relevant) {
    options.print(`  ${finding.severity}: ${finding.message}\n    fix: ${finding.fix}`)
  }
  return findings
}
