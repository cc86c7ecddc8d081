/**
 * `npm run demo` (with `npm start` running): each seed sample through its
 * natural source plus one poison event per source, then a table of what
 * became of each — outcome, and the email's subject and (masked) recipient,
 * or the dead-letter code. Then the recipient loop: a bounce that turns the
 * next email to that address into `suppressed`, and a one-click unsubscribe
 * that turns the next optional email into `opted-out`. Then a digest: five
 * responses to one project become one email. Then an invitation withdrawn
 * before its quiet hours ended: its invitee lives where it is night now, so
 * its email waits for the morning there (QUIET_HOURS_URGENCIES in .dev.vars
 * holds normal urgency, an invitation's), and invitation.withdrawn ends it
 * `cancelled`, never sent; every other recipient of the demo lives where it
 * is day now, so quiet hours hold nothing of theirs, whatever the hour.
 * Then the in-app inbox: the channel turned on for ResponseCreated, and one
 * more response to the same owner pushed to her open feed (the demo page of
 * `npm start`) beside its email.
 * Then an escalation: a response whose in-app item nobody looks at, whose
 * email goes once its wait ends (ESCALATION_AFTER_SECONDS in .dev.vars), and
 * the story's account of it.
 * Last, when `npm start -- --failover` runs the Worker with two transports
 * (resend, then cloudflare), a failover: the stand-in for Resend refuses the
 * API key, an email goes through the local send_email binding instead, and
 * after the pause's probe mail goes through resend again (DEMO_FAILOVER_FAULT
 * = quota: the daily quota used up instead of the key).
 */
import { readFileSync } from 'node:fs'
import { parseEnv } from 'node:util'
import { renderTable } from '../bin/table.ts'
import { localClock, nightAndDayZones } from '../support/time-zones.ts'
import { showWithdrawn } from './demo-cancel.ts'
import { showDigest } from './demo-digest.ts'
import { failoverRight, STAND_IN_CONTROL_PORT, showFailover, standInAt } from './demo-failover.ts'
import { DEMO_PAGE_PORT, showEscalation, showInboxLive } from './demo-inbox.ts'
import { collectOutcomes, mask, OWNER, sendSamples } from './demo-lib.ts'
import { showRecipientLoop } from './demo-recipients.ts'

const read = (file: string) => {
  try {
    return parseEnv(readFileSync(file, 'utf8')) as Record<string, string>
  } catch {
    return {} as Record<string, string>
  }
}
const env = { ...read('.env.example'), ...read('.env') }
const vars = { ...read('.dev.vars.example'), ...read('.dev.vars') }
const endpoints = {
  workerUrl: process.env.NOTIFY_EDGE_URL ?? 'http://127.0.0.1:8787',
  adminToken: process.env.NOTIFY_EDGE_TOKEN ?? (vars.ADMIN_TOKEN as string),
  pgUrl: env.PG_URL as string,
  rabbitUrl: env.RABBITMQ_URL as string,
  kafkaBrokers: (env.KAFKA_BROKERS as string).split(','),
}

// Quiet hours (QUIET_HOURS_START–QUIET_HOURS_END in the recipient's zone, wrangler.toml's unless .dev.vars says)
// hold normal urgency here: the withdrawn invitation's invitee lives where it is night now, everyone else where
// it is day, hours away from either end.
const zones = nightAndDayZones(vars.QUIET_HOURS_START ?? '22:00', vars.QUIET_HOURS_END ?? '08:00')

const demoPage = `http://127.0.0.1:${DEMO_PAGE_PORT}/?user=${OWNER}&lang=ru`
console.log(`to watch the in-app item arrive at the end, open the demo page now: ${demoPage}\n`)
console.log(
  `the demo's recipients live in ${zones.day}, where it is ${localClock(zones.day)} now: quiet hours hold nothing of theirs`,
)
console.log('sending the seed samples and one poison event per source…')
const sent = await sendSamples(endpoints, zones.day)
console.log(`sent ${sent.length} events; waiting for their outcomes…`)
const outcomes = await collectOutcomes(endpoints, sent)
console.log(
  renderTable(
    ['EVENT', 'SOURCE', 'OUTCOME', 'EMAIL SUBJECT', 'TO', 'DEAD LETTER'],
    outcomes.map((row) => [row.label, row.source, row.outcome, row.subject, mask(row.to), row.code]),
  ),
)
const wrong = outcomes.filter(
  (row) =>
    (row.expect === 'email' && row.notificationStatus !== 'sent') ||
    (row.expect === 'dead-letter' && row.outcome !== 'dead-lettered') ||
    (row.expect === 'ignored' && row.outcome !== 'ignored-event'),
)
if (wrong.length > 0) console.log(`\nnot as expected: ${wrong.map((row) => row.label).join(', ')}`)

console.log('\nthe recipient loop: a bounce, then an unsubscribe…')
const { steps: loop } = await showRecipientLoop(endpoints, vars.RESEND_WEBHOOK_SECRET as string, zones.day)
console.log(
  renderTable(
    ['STEP', 'EXPECTED', 'GOT'],
    loop.map((row) => [row.step, row.expected, row.got]),
  ),
)
const loopWrong = loop.filter((row) => row.got !== row.expected)
if (loopWrong.length > 0) console.log(`\nnot as expected: ${loopWrong.map((row) => row.step).join(', ')}`)
console.log('suppressed addresses: node bin/notify-edge.ts suppressions list')

console.log('\na digest: five responses to one project within a minute…')
const digest = await showDigest(endpoints, 120_000, zones.day)
console.log(
  renderTable(
    ['EVENT', 'RESPONSE FROM', 'STATUS', 'DIGEST'],
    digest.events.map((row) => [row.eventId.slice(0, 8), row.actor, row.status, row.digestId ?? '']),
  ),
)
const digestRight =
  digest.digest?.status === 'sent' &&
  digest.digest.size === 5 &&
  digest.events.every((row) => row.status === 'digested' && row.digestId === digest.digest?.id)
console.log(
  digest.digest
    ? `one email to ${mask(digest.owner.email)}: «${digest.digest.subject}» (${digest.digest.status}, ${digest.digest.size} responses)`
    : 'no digest was sent',
)
if (!digestRight) console.log('\nnot as expected: the digest')

console.log(
  `\nan invitation withdrawn before its quiet hours ended: its invitee lives in ${zones.night}, where it is ${localClock(zones.night)} now…`,
)
const withdrawn = await showWithdrawn(endpoints, zones.night)
const heldUntil = withdrawn.held?.scheduledAt
const afterEmail = withdrawn.after.find((row) => row.channel === 'email')
console.log(
  renderTable(
    ['EVENT', 'SOURCE', 'OUTCOME', 'THE EMAIL'],
    [
      [
        'invitation.created',
        'rabbitmq',
        withdrawn.created ?? 'not seen',
        withdrawn.held?.status === 'pending' && heldUntil
          ? `pending: held by quiet hours until ${localClock(zones.night, new Date(heldUntil))} there (${heldUntil})`
          : (withdrawn.held?.status ?? ''),
      ],
      ['invitation.withdrawn', 'rabbitmq', withdrawn.withdrawal ?? 'not seen', afterEmail?.status ?? ''],
    ],
  ),
)
console.log(`the invitation's story (GET /v1/events/${withdrawn.invitationEventId}):`)
for (const row of withdrawn.after) {
  console.log(`  ${row.channel}: ${row.status} (${row.statusReason ?? ''})`)
  console.log(
    `    scheduledAt: ${row.scheduledAt}, claimedAt: ${row.claimedAt}, sentAt: ${row.sentAt}, sendAttempts: ${row.sendAttempts}`,
  )
}
// Held, then withdrawn: every notification of the invitation cancelled, and none ever claimed or sent.
const withdrawnRight =
  withdrawn.held?.status === 'pending' &&
  withdrawn.withdrawal === 'cancellation' &&
  afterEmail !== undefined &&
  withdrawn.after.every(
    (row) => row.status === 'cancelled' && row.sentAt === null && row.providerId === null && row.sendAttempts === 0,
  )
if (!withdrawnRight) {
  console.log('\nnot as expected: the withdrawn invitation')
  if (withdrawn.held && withdrawn.held.status !== 'pending') {
    console.log(
      '(its email was not held: QUIET_HOURS_URGENCIES in .dev.vars must name normal, as .dev.vars.example does)',
    )
  }
}

// ResponseCreated's email waits for its in-app item to go unseen (30 minutes deployed; ESCALATION_AFTER_SECONDS
// in .dev.vars), then for its digest (DIGEST_WINDOW_SECONDS): the in-app steps wait for both, and a minute more.
const escalationSeconds = Number(vars.ESCALATION_AFTER_SECONDS ?? 1800)
const inboxTimeoutMs = (escalationSeconds + Number(vars.DIGEST_WINDOW_SECONDS ?? 600) + 60) * 1000
console.log('\nthe in-app inbox: the channel turned on, a response to the same owner while her feed is open…')
console.log(
  `(its email waits ${escalationSeconds} s for the item to go unseen: opening the bell on the demo page meanwhile spares it)`,
)
const live = await showInboxLive(endpoints, vars.INBOX_TOKEN_SECRET as string, inboxTimeoutMs)
console.log(
  renderTable(
    ['CHANNEL', 'STATUS', 'WHAT', 'ON THE OPEN PAGE'],
    [
      ['email', live.email?.status ?? 'not seen', live.email?.subject ?? '', ''],
      [
        'in-app',
        live.item?.status ?? 'not seen',
        live.item?.title ?? '',
        live.pushedAfterMs === undefined ? 'never' : `${live.pushedAfterMs} ms after the outbox row`,
      ],
    ],
  ),
)
const inboxRight = live.item !== undefined && live.email !== undefined
if (!inboxRight) console.log('\nnot as expected: the in-app item')
console.log(`the bell of that page: ${demoPage}`)

console.log(
  `\nan escalation: a response to a new owner whose in-app item nobody opens; its email waits ${escalationSeconds} s for it…`,
)
const escalated = await showEscalation(endpoints, inboxTimeoutMs, zones.day)
console.log(
  renderTable(
    ['CHANNEL', 'STATUS', 'WHAT'],
    [
      ['in-app', escalated.item?.status ?? 'not seen', 'nobody opened it'],
      ['email', escalated.email?.status ?? 'not seen', escalated.email?.subject ?? ''],
    ],
  ),
)
console.log(`its story (GET /v1/events/${escalated.eventId}) tells the escalation:`)
for (const [field, value] of Object.entries(escalated.escalation ?? {})) console.log(`  ${field}: ${value}`)
// `first: 'email'`: the feed decided that the email goes before any mark; `markedAt` null: nobody has looked yet.
const escalationRight =
  escalated.escalation?.first === 'email' &&
  escalated.escalation.markedAt === null &&
  ['sent', 'sent in a digest'].includes(escalated.email?.status ?? '')
if (!escalationRight) console.log('\nnot as expected: the escalation')

// A failover, when `npm start -- --failover` runs the Worker with two transports; otherwise nothing here.
const standIn = await standInAt(`http://127.0.0.1:${STAND_IN_CONTROL_PORT}`)
const transports = (await standIn?.state())?.transports ?? []
let failoverWrong = false
if (standIn && transports.length > 1) {
  const fault = process.env.DEMO_FAILOVER_FAULT === 'quota' ? 'quota' : 'key-revoked'
  console.log(
    `\nprovider failover (EMAIL_TRANSPORTS=${transports.join(',')}): the stand-in for Resend refuses (${fault === 'quota' ? '429 daily_quota_exceeded' : '403 invalid_api_key'}), then takes mail again…`,
  )
  const shown = await showFailover(endpoints, standIn, { timeZone: zones.day, fault })
  console.log(
    renderTable(
      ['STEP', 'STATUS', 'TRANSPORT', 'ATTEMPTS', 'STATUS REASON'],
      shown.rows.map((row) => [
        row.step,
        row.status,
        row.transport ?? '',
        String(row.sendAttempts),
        row.statusReason ?? '',
      ]),
    ),
  )
  console.log(
    "(a sent email keeps no status reason: its transport says which provider sent it; npm start's log names the one that failed over)",
  )
  console.log('what an operator sees while resend is paused:')
  console.log(`  /metrics: ${shown.pausedAfterRefusal.gauge ?? '(no notify_transport_paused line for resend)'}`)
  console.log(`  the doctor (GET /v1/health/config): ${shown.pausedAfterRefusal.finding ?? '(no finding)'}`)
  console.log("  npm start's log: transport.paused, then transport.failover (the email's next try goes to cloudflare)")
  console.log(
    `the probe was due ${shown.waitedForProbeSeconds} s later (transport_pauses.probe_at); the log says transport.probe, then transport.resumed`,
  )
  console.log(`after it: /metrics ${shown.pausedAtTheEnd.gauge ?? '(no notify_transport_paused line for resend)'}`)
  console.log(
    `during this step the stand-in took ${shown.byProvider.resend} emails and the local send_email binding ${shown.byProvider.cloudflare}`,
  )
  failoverWrong = !failoverRight(shown)
  if (failoverWrong) console.log('\nnot as expected: the failover')
}
console.log('\nthe emails: http://127.0.0.1:8787/cdn-cgi/local/explorer/api/local/email/sending')
console.log(`what it did, charted: ${endpoints.workerUrl}/console (sign in with the admin token of .dev.vars)`)
process.exit(
  wrong.length + loopWrong.length > 0 ||
    !digestRight ||
    !withdrawnRight ||
    !inboxRight ||
    !escalationRight ||
    failoverWrong
    ? 1
    : 0,
)
