/**
 * The demo's provider failover (docs/operating.md, "Provider failover"), when
 * `npm start -- --failover` runs the Worker with EMAIL_TRANSPORTS =
 * resend,cloudflare against the stand-in for Resend: an invitation goes
 * through resend; the stand-in starts refusing the API key (403
 * `invalid_api_key`, as a revoked key is refused), and the next invitation
 * goes through the cloudflare binding instead while the resend transport is
 * paused; the key is valid again, and once the pause's probe is due
 * (`transport_pauses.probe_at`: 30 s after the refusal) the next invitation is
 * the probe, accepted by resend, which ends the pause; the one after it goes
 * through resend as before. `npm start` serves the stand-in's control on
 * STAND_IN_CONTROL_PORT: the demo finds there whether the Worker fails over,
 * and sets the stand-in's fault.
 */
import { sentMails } from '../support/local-worker.ts'
import { api, type Endpoints, publishInvitation, until } from './demo-lib.ts'
import { invitationCreated, newRecipient } from './demo-recipients.ts'

/** Where `npm start` serves the stand-in's control, beside the Worker (8787), the bridge (8788) and the demo page (8789). */
export const STAND_IN_CONTROL_PORT = 8790

/** What the stand-in for Resend does to each request: nothing wrong, or one of the faults that fail over. */
export const STAND_IN_FAULTS = ['none', 'key-revoked', 'quota', 'outage'] as const
export type StandInFault = (typeof STAND_IN_FAULTS)[number]

/** The stand-in as its control reports it. */
export type StandInState = {
  /** The Worker's EMAIL_TRANSPORTS, in order (one entry: no failover). */
  transports: string[]
  fault: StandInFault
  /** Emails the stand-in accepted so far. */
  accepted: number
}

/** What the step needs of the stand-in: to set its fault, and to read its state. */
export type StandIn = {
  state: () => Promise<StandInState>
  setFault: (fault: StandInFault) => Promise<void>
}

/** The control `npm start` serves; undefined when none answers (`npm start` without `--resend`, or not running). */
export async function standInAt(url: string): Promise<StandIn | undefined> {
  const state = async () => {
    const response = await fetch(url)
    if (!response.ok) throw new Error(`the stand-in's control answered ${response.status}`)
    return (await response.json()) as StandInState
  }
  try {
    await state()
  } catch {
    return undefined
  }
  return {
    state,
    async setFault(fault) {
      const response = await fetch(`${url}/fault`, { method: 'POST', body: fault })
      if (!response.ok) throw new Error(`setting the stand-in's fault answered ${response.status}`)
    },
  }
}

/** One email of the step, as `GET /v1/notifications/{id}` shows it. */
export type FailoverRow = {
  step: string
  /** What the stand-in did meanwhile. */
  fault: StandInFault
  id: string
  status: string
  transport: string | null
  statusReason: string | null
  sendAttempts: number
  providerId: string | null
}

/** A transport's pause as an operator sees it: the `notify_transport_paused` gauge and the doctor's finding. */
export type PauseSeen = { gauge: string | null; finding: string | null; probeAt: string | null }

/** What the step showed. */
export type FailoverShown = {
  rows: FailoverRow[]
  /** The resend transport's pause right after the failover, and after the probe. */
  pausedAfterRefusal: PauseSeen
  pausedAtTheEnd: PauseSeen
  /** Seconds the step waited for the probe to be due. */
  waitedForProbeSeconds: number
  /** Emails each provider took during the step: the stand-in's, and the local send_email binding's. */
  byProvider: { resend: number; cloudflare: number }
}

const FINAL = ['sent', 'failed', 'suppressed', 'opted-out', 'cancelled', 'unknown', 'paused']

/** An invitation to a new person (one email), and its email once it came to something. */
async function invite(
  endpoints: Endpoints,
  step: string,
  fault: StandInFault,
  timeZone: string | undefined,
  timeoutMs: number,
): Promise<FailoverRow> {
  const person = await newRecipient(endpoints, 'failover', timeZone)
  const event = invitationCreated(person)
  await publishInvitation(endpoints, event)
  const row = await until(async () => {
    const story = await api(endpoints, `/v1/events/${event.envelope.eventId}`)
    const email = ((story.body?.notifications ?? []) as { id: string; channel: string }[]).find(
      (notification) => notification.channel === 'email',
    )
    if (!email) return undefined
    const { body } = await api(endpoints, `/v1/notifications/${email.id}`)
    return body && FINAL.includes(String(body.status)) ? body : undefined
  }, timeoutMs)
  return {
    step,
    fault,
    id: String(row?.id ?? ''),
    status: String(row?.status ?? 'not seen'),
    transport: (row?.transport as string | null) ?? null,
    statusReason: (row?.statusReason as string | null) ?? null,
    sendAttempts: Number(row?.sendAttempts ?? 0),
    providerId: (row?.providerId as string | null) ?? null,
  }
}

/** The resend transport's pause, as `/metrics` and the doctor (`GET /v1/health/config`) show it. */
async function pauseSeen(endpoints: Endpoints): Promise<PauseSeen> {
  const metrics = await fetch(new URL('/metrics', endpoints.workerUrl), {
    headers: { authorization: `Bearer ${endpoints.adminToken}` },
  }).then((response) => response.text())
  const gauge =
    metrics.split('\n').find((line) => line.startsWith('notify_transport_paused{') && line.includes('"resend"')) ?? null
  const health = await api(endpoints, '/v1/health/config')
  const finding = ((health.body?.findings ?? []) as { id: string; message: string }[]).find(
    (found) => found.id === 'transport-paused' && found.message.includes('resend'),
  )
  const probeAt = /next at (\d{4}-\d\d-\d\dT[\d:.]+Z)/.exec(finding?.message ?? '')?.[1] ?? null
  return { gauge, finding: finding?.message ?? null, probeAt }
}

/** Whether `seen` says the resend transport is paused: its gauge at 1. */
export function pausedIn(seen: PauseSeen): boolean {
  return seen.gauge !== null && /\s1$/.test(seen.gauge.trim())
}

/**
 * The failover on the running dispatcher: an email through resend, one through cloudflare while the
 * stand-in refuses the key, then (the key valid again) the probe and one more, both through resend.
 * Leaves the stand-in without a fault.
 */
export async function showFailover(
  endpoints: Endpoints,
  standIn: StandIn,
  options: { timeZone?: string; fault?: StandInFault; timeoutMs?: number; probeWaitMs?: number } = {},
): Promise<FailoverShown> {
  const fault = options.fault ?? 'key-revoked'
  const timeoutMs = options.timeoutMs ?? 90_000
  const resendBefore = (await standIn.state()).accepted
  const cloudflareBefore = (await sentMails(endpoints.workerUrl)).length
  const rows: FailoverRow[] = []
  rows.push(await invite(endpoints, 'before: the stand-in takes mail', 'none', options.timeZone, timeoutMs))
  await standIn.setFault(fault)
  let pausedAfterRefusal: PauseSeen
  try {
    rows.push(await invite(endpoints, `the stand-in refuses (${fault})`, fault, options.timeZone, timeoutMs))
    pausedAfterRefusal = await pauseSeen(endpoints)
  } finally {
    await standIn.setFault('none')
  }
  // The probe is due at the pause's probe_at (30 s after the refusal: src/dispatch/pause.ts), which the
  // doctor names; without it, 30 s from now at most.
  const dueAt = pausedAfterRefusal.probeAt ? Date.parse(pausedAfterRefusal.probeAt) : Date.now() + 30_000
  const waitMs = Math.max(0, Math.min(options.probeWaitMs ?? 11 * 60_000, dueAt + 1000 - Date.now()))
  await new Promise((resolve) => setTimeout(resolve, waitMs))
  // The first email claimed once the probe is due is the probe; one claimed just before goes on
  // through cloudflare, so a few more are sent until one went through resend.
  for (let attempt = 0; attempt < 4; attempt += 1) {
    const probe = await invite(
      endpoints,
      'the stand-in takes mail again: the probe',
      'none',
      options.timeZone,
      timeoutMs,
    )
    rows.push(probe)
    if (probe.transport === 'resend' || probe.status !== 'sent') break
    await new Promise((resolve) => setTimeout(resolve, 5000))
  }
  rows.push(await invite(endpoints, 'after: mail back on resend', 'none', options.timeZone, timeoutMs))
  return {
    rows,
    pausedAfterRefusal,
    pausedAtTheEnd: await pauseSeen(endpoints),
    waitedForProbeSeconds: Math.round(waitMs / 1000),
    byProvider: {
      resend: (await standIn.state()).accepted - resendBefore,
      cloudflare: (await sentMails(endpoints.workerUrl)).length - cloudflareBefore,
    },
  }
}

/** Whether the step showed a failover and the way back: the expected transports, in order. */
export function failoverRight(shown: FailoverShown): boolean {
  const [before, refused, ...rest] = shown.rows
  const after = rest.at(-1)
  const probe = rest.at(-2)
  return (
    before?.status === 'sent' &&
    before.transport === 'resend' &&
    refused?.status === 'sent' &&
    refused.transport === 'cloudflare' &&
    pausedIn(shown.pausedAfterRefusal) &&
    probe?.status === 'sent' &&
    probe.transport === 'resend' &&
    after?.status === 'sent' &&
    after.transport === 'resend' &&
    !pausedIn(shown.pausedAtTheEnd)
  )
}
