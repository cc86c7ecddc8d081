import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it } from 'vitest'
import { registerEventType } from '../../src/events/registry.ts'
import { taskReminder } from '../event-types/task-reminder.ts'
import { allRows } from '../shards.ts'
import {
  advance,
  advanceToProbe,
  type Command,
  cancel,
  changeAddress,
  cron,
  deliver,
  emit,
  erase,
  failD1,
  lateEvents,
  loseEvents,
  mail,
  operate,
  play,
  providerFault,
  providerState,
  refuseQueue,
  report,
  step,
} from './commands.ts'
import { type ModelTransport, type ModelTransports, World } from './world.ts'

registerEventType(taskReminder)

/**
 * The sequences where two features meet and a guarantee broke, each played
 * through the lifecycle model's world (./world.ts) and judged by its
 * invariants (./invariants.ts), with what the sequence is about asserted
 * besides. Each failed on the code before its fix.
 */

// Resend's faults by name, as providerFault takes them (./commands.ts RESEND_FAULTS).
const LOSE = 0
const FAIL_5XX = 1
const REFUSE_422 = 2
// The binding's (BINDING_FAULTS).
const BINDING_LOSE = 0

let world: World | undefined

afterEach(() => {
  world?.close()
  world = undefined
})

/**
 * Plays `steps` in a new world of `transport`. Without the in-app channel
 * unless `options` turn it on: the sequences found before the inbox are
 * about emails alone (an invitation's item would join their batches).
 */
async function run(
  transport: ModelTransports,
  steps: readonly Command[],
  options: ConstructorParameters<typeof World>[1] = {},
): Promise<{ violations: string[]; world: World }> {
  world = new World(transport, { inApp: false, ...options })
  const violations = await play(world, steps)
  return { violations, world }
}

type Row = {
  id: string
  status: string
  error_code: string | null
  recipient_user_id: string
  status_reason: string | null
}

async function rows(): Promise<Row[]> {
  const { results } = await env.DB.prepare(
    'SELECT id, status, error_code, recipient_user_id, status_reason FROM notifications WHERE is_digest = 0 ORDER BY created_at, id',
  ).all<Row>()
  return results
}

/** Every notification of the run (digests aside) sent, each in exactly one email Resend took. */
async function expectEachSentOnce(world: World): Promise<void> {
  for (const row of await rows()) {
    expect(row.status).toBe('sent')
    expect(world.resend.emailsOf(row.id)).toHaveLength(1)
  }
}

/** Delivers only the dispatch messages of one person's notifications. */
function deliverFor(person: number): Command {
  return step(`deliver(DISPATCH, person ${person}'s only)`, async (w) => {
    const ids = new Set(
      (await rows()).filter((row) => row.recipient_user_id === w.people[person]?.userId).map((row) => row.id),
    )
    await w.deliver('DISPATCH', (visible) =>
      visible.filter((message) => ids.has((message.body as { notificationId: string }).notificationId)),
    )
  })
}

/**
 * What is waiting is sent, Resend takes it and the answer is lost; a quota
 * pauses the retry for 25 hours, past Resend's window; the retry is claimed.
 */
const LOST_THEN_PAST_THE_WINDOW = [
  providerFault(LOSE),
  deliver('DISPATCH'),
  providerState('quota', true),
  advance(6),
  deliver('DISPATCH'),
  advance(90_001),
  providerState('quota', false),
  cron(),
  deliver('DISPATCH'),
]

/** An invitation the binding took with its answer lost: unknown, waiting for the binding's delivery event. */
const BINDING_ANSWER_LOST = [emit('invitation', 0), deliver('EVENTS'), providerFault(BINDING_LOSE), deliver('DISPATCH')]

/** An invitation whose answer was lost, then left unknown past Resend's window: failed, as a dead letter. */
const FAILED_UNKNOWN = [
  emit('invitation', 0),
  deliver('EVENTS'),
  ...LOST_THEN_PAST_THE_WINDOW,
  advance(601),
  cron(),
  step('it failed as a dead letter', async () => {
    expect((await rows())[0]).toMatchObject({ status: 'failed', error_code: 'NTF_SEND_UNKNOWN' })
  }),
]

/** Two invitations, to person 0 and person 2, sent in one Resend batch. */
const BATCH_OF_TWO = [emit('invitation', 0), emit('invitation', 2), deliver('EVENTS')]

describe('guarantees where features meet', () => {
  it.each([
    ['the key revoked', providerState('revoked', true), providerState('revoked', false)],
    ['the batch refused as invalid', providerFault(REFUSE_422), cron()],
  ])(
    'a batch whose answer was lost, then a 4xx on its retry (%s): every member emailed once',
    async (_, fault, fix) => {
      const { violations, world } = await run('resend', [
        ...BATCH_OF_TWO,
        providerFault(LOSE),
        deliver('DISPATCH'),
        fault,
        advance(6),
        deliver('DISPATCH'),
        fix,
      ])
      expect(violations).toEqual([])
      for (const row of await rows()) expect(world.resend.emailsOf(row.id)).toHaveLength(1)
    },
  )

  it('a batch held for its retry meets a pause begun by another send: the pause ends, every email goes once', async () => {
    const { violations, world } = await run('resend', [
      // One after the other, so that the first is the oldest paused notification: the next probe.
      emit('invitation', 0),
      deliver('EVENTS'),
      advance(1),
      emit('invitation', 2),
      deliver('EVENTS'),
      providerFault(FAIL_5XX),
      deliver('DISPATCH'),
      advance(1),
      emit('invitation', 1),
      deliver('EVENTS'),
      providerState('revoked', true),
      deliver('DISPATCH'),
      advance(5),
      deliver('DISPATCH'),
      step('the batch is paused, still a batch', async () => {
        const paused = (await rows()).filter((row) => row.status === 'paused')
        expect(paused).toHaveLength(3)
      }),
      providerState('revoked', false),
    ])
    expect(violations).toEqual([])
    await expectEachSentOnce(world)
  })

  it('a batch taken whose marks were lost meets a pause that outlasts Resend’s window: not sent again', async () => {
    const { violations, world } = await run('resend', [
      ...BATCH_OF_TWO,
      // The dispatch's third D1 call is the write of the batch's result: Resend took it, nothing recorded it.
      failD1(3),
      deliver('DISPATCH'),
      advance(1),
      emit('invitation', 1),
      deliver('EVENTS'),
      providerState('revoked', true),
      deliver('DISPATCH', 'newest'),
      // Past the lease: the cron takes the batch up again, and the pause holds it.
      advance(125),
      cron(),
      deliver('DISPATCH'),
      step('the pause holds the batch, which may have gone out', async () => {
        const held = await env.DB.prepare(
          'SELECT status, maybe_sent_at FROM notifications WHERE batch_id IS NOT NULL',
        ).all<{ status: string; maybe_sent_at: string | null }>()
        expect(held.results.map((row) => row.status)).toEqual(['paused', 'paused'])
        for (const row of held.results) expect(row.maybe_sent_at).not.toBeNull()
      }),
      advance(90_001),
      providerState('revoked', false),
    ])
    expect(violations).toEqual([])
    for (const row of await rows()) expect(world.resend.emailsOf(row.id)).toHaveLength(1)
  })

  it.each([
    ['no event came: an operator’s dead letter says why', false],
    ['its email.sent webhook came: sent', true],
  ])(
    'a retry after a lost answer that would come past Resend’s 24-hour window is not sent blindly (%s)',
    async (_, reported) => {
      const { violations, world } = await run('resend', [
        emit('invitation', 0),
        deliver('EVENTS'),
        providerFault(LOSE),
        deliver('DISPATCH'),
        ...(reported ? [report(0, 'sent'), deliver('EMAIL_EVENTS')] : []),
        providerState('quota', true),
        advance(6),
        deliver('DISPATCH'),
        advance(90_001),
        providerState('quota', false),
      ])
      expect(violations).toEqual([])
      const [row] = await rows()
      expect(world.resend.emailsOf(row?.id ?? '')).toHaveLength(1)
      if (reported) expect(row?.status).toBe('sent')
      else {
        expect(row).toMatchObject({ status: 'failed', error_code: 'NTF_SEND_UNKNOWN' })
        const letter = await env.DB.prepare(
          "SELECT status, code, error FROM dead_letters WHERE json_extract(body, '$.notificationId') = ?1",
        )
          .bind(row?.id)
          .first<{ status: string; code: string; error: string }>()
        expect(letter).toMatchObject({ status: 'open', code: 'NTF_SEND_UNKNOWN' })
        expect(letter?.error).toMatch(/idempotency window/)
      }
    },
  )

  it('a batch left unknown past the window is settled whole by a delivery event about one member', async () => {
    const { violations, world } = await run('resend', [
      ...BATCH_OF_TWO,
      ...LOST_THEN_PAST_THE_WINDOW,
      step('both wait for delivery events', async () => {
        expect((await rows()).map((row) => row.status)).toEqual(['unknown', 'unknown'])
      }),
      report(0, 'delivered'),
      deliver('EMAIL_EVENTS'),
      advance(601),
      cron(),
    ])
    expect(violations).toEqual([])
    await expectEachSentOnce(world)
  })

  it('an operator’s replay of a send left unknown past the window sends it again: the operator decided', async () => {
    const { violations, world } = await run('resend', [...FAILED_UNKNOWN, operate('replay', 0), deliver('DISPATCH')])
    expect(violations).toEqual([])
    const [row] = await rows()
    expect(row?.status).toBe('sent')
    expect(world.resend.emailsOf(row?.id ?? '')).toHaveLength(2)
  })

  // Found by a review of the answer's unconfirmedThrough: the replay forgets that the send may have gone out
  // (maybe_sent_at), and a cancellation then withdrew it as one never sent, answering cancelled with nothing
  // named, over the email Resend had taken.
  it('an operator’s replay of a send left unknown past the window, then cancelled: the answer names resend', async () => {
    const { violations, world } = await run('resend', [
      ...FAILED_UNKNOWN,
      operate('replay', 0),
      cancel(0),
      deliver('DISPATCH'),
    ])
    expect(violations).toEqual([])
    const [row] = await rows()
    expect(row?.status).toBe('cancelled')
    expect(row?.status_reason).toMatch(/; a try through resend may have gone out/)
    expect(world.resend.emailsOf(row?.id ?? '')).toHaveLength(1)
    expect(world.cancels.flatMap((done) => done.answered)).toMatchObject([
      { outcome: 'cancelled', unconfirmedThrough: ['resend'] },
    ])
  })

  it('a verification decision whose fallback’s answer was lost under Resend: one email for the decision', async () => {
    const { violations } = await run('resend', [
      emit('fallback', 0, 0),
      deliver('EVENTS'),
      advance(601),
      providerFault(LOSE),
      deliver('DISPATCH'),
      emit('authoritative', 0, 0),
      deliver('EVENTS'),
      deliver('DISPATCH', 'newest'),
    ])
    expect(violations).toEqual([])
  })

  it('a send refused for good while notify-dlq refuses its dead letter: the failed notification has its dead letter', async () => {
    const { violations } = await run('resend', [
      emit('invitation', 0),
      deliver('EVENTS'),
      providerFault(REFUSE_422),
      refuseQueue('DLQ', true),
      deliver('DISPATCH'),
      refuseQueue('DLQ', false),
    ])
    expect(violations).toEqual([])
    expect((await rows())[0]).toMatchObject({ status: 'failed', error_code: 'NTF_SEND_PERMANENT' })
  })

  it.each([
    ['its first request failed', FAIL_5XX],
    ['its first request was taken, the answer lost', LOSE],
  ])('erasing one member of a batch waiting for its retry (%s): the others get their email, once', async (_, fault) => {
    const { violations, world } = await run('resend', [
      ...BATCH_OF_TWO,
      providerFault(fault),
      deliver('DISPATCH'),
      erase(0, 'userId'),
    ])
    expect(violations).toEqual([])
    const other = (await rows()).find((row) => row.recipient_user_id === world.people[2]?.userId)
    expect(other?.status).toBe('sent')
    expect(world.resend.emailsOf(other?.id ?? '')).toHaveLength(1)
  })

  it('a bounce that arrives after its recipient was erased keeps the address suppressed under its pseudonym only', async () => {
    const { violations, world } = await run('resend', [
      emit('invitation', 0),
      deliver('EVENTS'),
      deliver('DISPATCH'),
      erase(0, 'address'),
      report(0, 'bounced'),
      deliver('EMAIL_EVENTS'),
    ])
    expect(violations).toEqual([])
    const suppressions = await env.DB.prepare('SELECT address FROM suppressions').all<{ address: string }>()
    expect(suppressions.results).toHaveLength(1)
    expect(suppressions.results[0]?.address).toMatch(/^hmac:/)
    world.note('the erased address is suppressed when it comes back')
  })

  it('erasing by user id reaches an address the person had before, after retention took it off their notifications', async () => {
    const { violations } = await run(
      'resend',
      [
        emit('invitation', 0),
        deliver('EVENTS'),
        deliver('DISPATCH'),
        report(0, 'bounced'),
        deliver('EMAIL_EVENTS'),
        changeAddress(0),
        emit('contact', 0),
        emit('invitation', 0),
        deliver('EVENTS'),
        deliver('DISPATCH'),
        advance(8 * 86_400),
        cron(),
        erase(0, 'userId'),
      ],
      { vars: { NOTIFICATION_CONTENT_RETENTION_DAYS: '7' } },
    )
    expect(violations).toEqual([])
  })

  it('the throttle holds in any sliding hour: no nine emails across the edge of a fixed window', async () => {
    const five = (count: number) => Array.from({ length: count }, () => emit('response', 0))
    const { violations } = await run('resend', [
      ...five(1),
      deliver('EVENTS'),
      deliver('DISPATCH'),
      advance(58 * 60),
      ...five(4),
      deliver('EVENTS'),
      deliver('DISPATCH'),
      advance(3 * 60),
      ...five(5),
      deliver('EVENTS'),
      deliver('DISPATCH'),
    ])
    expect(violations).toEqual([])
  })

  // Found by the model: a window's places are the times its notifications were written, and five responses
  // written in one millisecond share one; the withdrawal once removed every place of that time, leaving the
  // window empty instead of four places, and the rest of the hour went one by one, an hour late, instead of in
  // the digest (nine emails and no digest for ten responses, one withdrawn). src/notifications/cancel.ts,
  // givePlacesBack, now gives back one place per notification withdrawn.
  it('a withdrawn response gives back its own throttle place only: the rest of the hour goes to the digest', async () => {
    const five = () => Array.from({ length: 5 }, () => emit('response', 0))
    const { violations } = await run('resend', [
      ...five(),
      deliver('EVENTS'),
      cancel(0, 'response'),
      ...five(),
      deliver('EVENTS'),
    ])
    expect(violations).toEqual([])
    const statuses = (await rows()).map((row) => row.status)
    // Four of the first five and the first of the next take the window's five places; the other four are folded.
    expect(statuses.filter((status) => status === 'cancelled')).toHaveLength(1)
    expect(statuses.filter((status) => status === 'sent')).toHaveLength(5)
    expect(statuses.filter((status) => status === 'digested')).toHaveLength(4)
  })

  it('reminders that waited for their contact are released through the throttle and the digest, as planning writes them', async () => {
    const reminder = (userId: string, task: string) => ({
      source: 'http',
      origin: `model:reminder:${task}`,
      sourceMessageId: crypto.randomUUID(),
      receivedAt: new Date().toISOString(),
      headers: {},
      body: JSON.stringify({
        envelope: {
          eventId: crypto.randomUUID(),
          eventType: 'task.reminder',
          schemaVersion: 1,
          occurredAt: new Date().toISOString(),
          producer: 'arthunt-api',
        },
        data: { userId, task },
      }),
    })
    const remind = (count: number) =>
      step(`${count} reminders to person 1 (no contact yet)`, async (w) => {
        const userId = w.people[1]?.userId as string
        const status = await w.ingest(Array.from({ length: count }, (_, index) => reminder(userId, `Задача ${index}`)))
        expect(status).toBe(202)
      })
    const { violations, world } = await run('resend', [
      remind(5),
      deliver('EVENTS'),
      step('all five wait for the contact', async () => {
        expect((await rows()).map((row) => row.status)).toEqual(Array(5).fill('awaiting-contact'))
      }),
      emit('contact', 1),
      deliver('EVENTS'),
      deliver('DISPATCH'),
    ])
    expect(violations).toEqual([])
    // The throttle allows two an hour: two go at once, three are told in one digest.
    const statuses = (await rows()).map((row) => row.status).sort()
    expect(statuses).toEqual(['digested', 'digested', 'digested', 'sent', 'sent'])
    const digests = await env.DB.prepare('SELECT status, digest_size FROM notifications WHERE is_digest = 1').all()
    expect(digests.results).toEqual([{ status: 'sent', digest_size: 3 }])
    expect(world.resend.emails).toHaveLength(3)
  })

  it('a delivery event that arrives after an unknown outcome went back to pending settles it: no second email', async () => {
    const { violations, world } = await run('cloudflare', [
      ...BINDING_ANSWER_LOST,
      // Late, past the wait for it (the clock moved without Cloudflare's event being taken).
      step('advance(601 s) with the delivery event still on its queue', async (w) => w.clock.advance(601)),
      cron(),
      deliver('EMAIL_EVENTS'),
      advance(5),
      deliver('EMAIL_EVENTS'),
      advance(11),
      deliver('EMAIL_EVENTS'),
      cron(),
      deliver('DISPATCH'),
    ])
    expect(violations).toEqual([])
    const [row] = await rows()
    expect(world.binding.emailsOf(row?.id ?? '')).toHaveLength(1)
    expect(row?.status).toBe('sent')
  })

  // Found by a read of the answer `unconfirmedThrough` was added to: a cancellation that came while the binding's
  // answer was lost marks the email in flight; the wait for its delivery event ends with none, and the email ends
  // cancelled, taken as not sent. Asked again, the cancellation answered `cancelled` with nothing to say the
  // binding had taken it, which the row's reason said.
  it('an email cancelled while its outcome was unknown, taken as not sent: a second cancellation names the binding', async () => {
    const { violations, world } = await run('cloudflare', [
      ...BINDING_ANSWER_LOST,
      cancel(0),
      step('lateEvents(601 s): the binding’s event comes after the wait for it', (w) => w.lateEvents(601)),
      cron(),
      cancel(0),
      deliver('EMAIL_EVENTS'),
    ])
    expect(violations).toEqual([])
    const [row] = await rows()
    expect(row?.status).toBe('cancelled')
    expect(world.binding.emailsOf(row?.id ?? '')).toHaveLength(1)
    expect(
      world.cancels.map((done) =>
        done.answered.map(({ outcome, unconfirmedThrough }) => [outcome, unconfirmedThrough]),
      ),
    ).toEqual([[['in-flight', []]], [['cancelled', ['cloudflare']]]])
  })

  it('a batch member failed for good without a message of its own, while notify-dlq refuses: its dead letter is kept', async () => {
    // Its tenth try, the last the policy allows, with notify-dlq refusing.
    const tries = Array.from({ length: 9 }, () => [advance(3601), deliverFor(0)]).flat()
    const { violations } = await run('resend', [
      ...BATCH_OF_TWO,
      providerState('down', true),
      deliver('DISPATCH'),
      ...tries.slice(0, -1),
      refuseQueue('DLQ', true),
      tries.at(-1) as Command,
      refuseQueue('DLQ', false),
    ])
    expect(violations).toEqual([])
    expect((await rows()).map((row) => row.status)).toEqual(['failed', 'failed'])
  })

  it('a PIN decision whose contact never came is a dead letter its event’s story shows', async () => {
    const { violations, world } = await run('resend', [
      emit('authoritative', 1, 0),
      deliver('EVENTS'),
      advance(86_401),
      cron(),
      deliver('DLQ'),
    ])
    expect(violations).toEqual([])
    const eventId = await env.DB.prepare('SELECT event_id FROM notifications').first<string>('event_id')
    const story = (await (await world.operator('GET', `/v1/events/${eventId}`)).json()) as {
      deadLetters: { code: string }[]
    }
    expect(story.deadLetters.map((letter) => letter.code)).toEqual(['NTF_CONTACT_NOT_FOUND'])
    const found = (await (await world.operator('GET', `/v1/dead-letters?q=${eventId}`)).json()) as { items: unknown[] }
    expect(found.items).toHaveLength(1)
  })
})

describe('found by the failover model, outside failover', () => {
  // Found by the model (`npm run model -- --runs 250 --commands 50 --seed 20261204`, run 153 in both projects,
  // shrunk to a failover world; it needs none): an event whose third attempt failed (notify-dispatch refused
  // its sends) goes to notify-dlq as it was — the person's address and name in its body — and the erasure runs
  // while it is still on that queue. The DLQ consumer then stores it as a dead letter after the erasure: the
  // address and name are back in D1 (docs/architecture.md: an event on its way when the erasure ran writes
  // nothing of them). src/dead-letters/dlq-consumer.ts does not look at `erased_addresses`.
  // TODO: drop `.fails` with the fix in src (the model's invariant "erased means gone" is what breaks).
  it('an event’s dead letter still on notify-dlq when its recipient is erased is stored without them', async () => {
    const { violations } = await run('resend', [
      refuseQueue('DISPATCH', true),
      emit('invitation', 0),
      deliver('EVENTS'),
      advance(6),
      deliver('EVENTS'),
      advance(31),
      // The third attempt: the events consumer sends it to notify-dlq; the model delivers that queue in its drain.
      deliver('EVENTS'),
      erase(0, 'userId'),
    ])
    expect(violations).toEqual([])
  })
})

// The two orders of EMAIL_TRANSPORTS; the first transport is the one that fails.
const ORDERS: [string, ModelTransport[]][] = [
  ['resend, then cloudflare', ['resend', 'cloudflare']],
  ['cloudflare, then resend', ['cloudflare', 'resend']],
]

/** The answer both transports' lists name first: taken, and the answer lost (RESEND_FAULTS, BINDING_FAULTS). */
const TAKEN_LOST = 0

type Routed = { id: string; status: string; transport: string | null; status_reason: string | null }

/**
 * Every email notification of the run's people, oldest first: not the drain's own new mail, which probes a
 * transport still paused when it began.
 */
async function routed(): Promise<Routed[]> {
  const people = (world?.people ?? []).slice(0, 3).map((person) => person.userId)
  return (
    await allRows<Routed & { created_at: string }>(
      `SELECT id, status, transport, status_reason, created_at FROM notifications
       WHERE channel = 'email' AND recipient_user_id IN (SELECT value FROM json_each(?1))`,
      JSON.stringify(people),
    )
  ).sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0))
}

/** The delivery events about an email, as the Worker stored them. */
function eventsAbout(email: { transport: string; providerId: string } | undefined) {
  const id = email?.providerId.replace(/^<(.*)>$/, '$1') ?? ''
  return allRows<{ provider: string; notification_id: string | null }>(
    'SELECT provider, notification_id FROM delivery_events WHERE provider = ?1 AND provider_message_id = ?2',
    email?.transport,
    id,
  )
}

/** The transports that accepted each email of a notification, in order. */
function acceptedThrough(world: World, id: string): string[] {
  return world
    .emails()
    .filter((email) => email.notificationId === id)
    .map((email) => email.transport)
}

/**
 * An email taken by the first transport whose answer was lost, then the
 * first refuses for our configuration (its key revoked, its sender not
 * verified): the retry through it is refused, and the email waits for its
 * delivery events before the second may send it (`events`: what the model
 * lets happen to those events meanwhile).
 */
function lostThenRevoked(events: 'come' | 'lost' | 'late') {
  const hold = (seconds: number) => (events === 'late' ? lateEvents(seconds) : advance(seconds))
  return [
    mail('invitation', 0),
    providerFault(TAKEN_LOST),
    deliver('DISPATCH'),
    providerState('revoked', true),
    ...(events === 'lost' ? [loseEvents(0)] : []),
    // Through the binding the lost answer waits for its events first, and is sent again (refused) after.
    hold(601),
    cron(),
    deliver('DISPATCH'),
    // Refused: the first pauses, and the email, which may have gone out through it, waits for its events.
    deliver('DISPATCH'),
    hold(601),
    cron(),
    // Freed: the claim picks it as the first's probe (refused), then the second sends it.
    deliver('DISPATCH'),
    deliver('DISPATCH'),
    deliver('DISPATCH'),
  ]
}

describe('failover between two transports (EMAIL_TRANSPORTS)', () => {
  it.each(ORDERS)(
    '%s: the first’s key revoked, mail goes through the second; the first comes back by the probe the claim picks',
    async (_, order) => {
      const { violations } = await run(order, [
        mail('invitation', 0),
        providerState('revoked', true),
        deliver('DISPATCH'),
        deliver('DISPATCH'),
        step('the first is paused, the email went through the second', async (w) => {
          const [row] = await routed()
          expect(row).toMatchObject({ status: 'sent', transport: order[1] })
          expect(acceptedThrough(w, row?.id ?? '')).toEqual([order[1]])
          expect(await allRows('SELECT transport FROM transport_pauses')).toEqual([{ transport: order[0] }])
        }),
        providerState('revoked', false),
        advanceToProbe(),
        mail('invitation', 2),
        deliver('DISPATCH'),
        step('the probe went through the first, and ended its pause', async (w) => {
          const [, probe] = await routed()
          expect(probe).toMatchObject({ status: 'sent', transport: order[0] })
          expect(acceptedThrough(w, probe?.id ?? '')).toEqual([order[0]])
          expect(await allRows('SELECT transport FROM transport_pauses')).toEqual([])
        }),
      ])
      expect(violations).toEqual([])
    },
  )

  it.each(ORDERS)(
    '%s: a lost answer through the first, then its key revoked: the email waits for the first’s events, which settle it',
    async (_, order) => {
      const { violations, world } = await run(order, lostThenRevoked('come'))
      expect(violations).toEqual([])
      const [row] = await routed()
      expect(row).toMatchObject({ status: 'sent', transport: order[0] })
      expect(acceptedThrough(world, row?.id ?? '')).toEqual([order[0]])
    },
  )

  it.each(ORDERS)(
    '%s: a lost answer through the first whose events are lost: the second sends it only after the wait for them',
    async (_, order) => {
      const { violations, world } = await run(order, lostThenRevoked('lost'))
      // The documented exception (docs/operating.md, "Provider failover"), and only it.
      expect(violations).toEqual([])
      const [row] = await routed()
      const id = row?.id ?? ''
      expect(row).toMatchObject({ status: 'sent', transport: order[1] })
      expect(acceptedThrough(world, id)).toEqual(order)
      const [first, second] = world.emails().filter((email) => email.notificationId === id)
      const wait = world.waits.find((candidate) => candidate.id === id && candidate.failover === order[0])
      const end = world.resolutions.find((candidate) => candidate.id === id && candidate.failover === order[0])
      expect(wait).toMatchObject({ from: order[0], paused: true })
      expect(end?.from).toBe(order[0])
      expect(Date.parse(wait?.until ?? '')).toBeLessThanOrEqual(end?.at ?? 0)
      expect(first?.at).toBeLessThan(end?.at ?? 0)
      expect(second?.at).toBeGreaterThanOrEqual(end?.at ?? Number.POSITIVE_INFINITY)
      expect(await eventsAbout(first)).toEqual([])
    },
  )

  it.each(ORDERS)(
    '%s: the first’s events come after the wait and the second sent it: they settle nothing of it',
    async (_, order) => {
      const { violations, world } = await run(order, [...lostThenRevoked('late'), advance(61), deliver('EMAIL_EVENTS')])
      expect(violations).toEqual([])
      const [row] = await routed()
      const id = row?.id ?? ''
      expect(row).toMatchObject({ status: 'sent', transport: order[1] })
      expect(acceptedThrough(world, id)).toEqual(order)
      // The first's event is kept, about no notification; the second's about this one.
      const [first, second] = world.emails().filter((email) => email.notificationId === id)
      expect(await eventsAbout(first)).toEqual([{ provider: order[0], notification_id: null }])
      expect(await eventsAbout(second)).toEqual([{ provider: order[1], notification_id: id }])
    },
  )

  it('cloudflare, then resend: an email that may have gone out through resend while the binding was paused is tried again through resend when the binding is back', async () => {
    const { violations, world } = await run(
      ['cloudflare', 'resend'],
      [
        mail('invitation', 0),
        providerState('revoked', true),
        // Refused by the binding (its sender not verified): through Resend at once, which takes it and the answer is lost.
        deliver('DISPATCH'),
        providerFault(TAKEN_LOST, 1),
        deliver('DISPATCH'),
        loseEvents(1),
        providerState('revoked', false),
        advanceToProbe(),
        mail('invitation', 2),
        // The new email is the binding's probe, accepted: the binding is usable again, and first.
        deliver('DISPATCH', 'newest'),
        step('the binding’s pause ended', async () => {
          expect(await allRows('SELECT transport FROM transport_pauses')).toEqual([])
        }),
        // The retry of the one that may have gone out through Resend: through Resend, under its key.
        deliver('DISPATCH'),
      ],
    )
    expect(violations).toEqual([])
    const [row, probe] = await routed()
    expect(row).toMatchObject({ status: 'sent', transport: 'resend' })
    expect(acceptedThrough(world, row?.id ?? '')).toEqual(['resend'])
    expect(probe).toMatchObject({ status: 'sent', transport: 'cloudflare' })
  })

  it('resend, then cloudflare: one that failed over to the binding and lost its answer there is sent again through the binding, not freed as leaving resend', async () => {
    const steps = lostThenRevoked('lost')
    const { violations, world } = await run(
      ['resend', 'cloudflare'],
      [
        // Up to the end of the wait for Resend's events: freed, it is refused as Resend's probe, then…
        ...steps.slice(0, -2),
        // … the binding takes it, and the answer is lost, and so are the binding's events.
        providerFault(TAKEN_LOST, 1),
        ...steps.slice(-2),
        loseEvents(1),
        advance(601),
        cron(),
        deliver('DISPATCH'),
        deliver('DISPATCH'),
      ],
    )
    // Twice the documented exception: resend's events lost, then the binding's.
    expect(violations).toEqual([])
    const [row] = await routed()
    const id = row?.id ?? ''
    expect(acceptedThrough(world, id)).toEqual(['resend', 'cloudflare', 'cloudflare'])
    expect(world.resolutions.filter((end) => end.id === id).map((end) => [end.from, end.failover])).toEqual([
      ['resend', 'resend'],
      ['cloudflare', null],
    ])
  })

  // Found by the model (seed 41, before it read a transport's pause as the claim did): the probe of a circuit,
  // picked by the claim, closed it in the very batch whose claim had sent two emails that may have gone out to
  // wait for the first's events. They wait the whole of it, and go once.
  it('resend, then cloudflare: two emails wait for Resend’s events while the probe of the same claim closes its circuit', async () => {
    const { violations, world } = await run(
      ['resend', 'cloudflare'],
      [
        providerState('down', true),
        // A verification decision goes alone, the invitation too (a batch of one): a 503 and an answer lost,
        // both may have gone out, and the circuit opens.
        emit('authoritative', 0, 0),
        mail('invitation', 0),
        deliver('DISPATCH'),
        mail('invitation', 0),
        providerState('down', false),
        advance(31),
        deliver('DISPATCH'),
        step('the new email was the probe, and closed the circuit; the two wait for Resend’s events', async (w) => {
          expect(await allRows('SELECT transport FROM transport_pauses')).toEqual([])
          const rows = await routed()
          expect(rows.map((row) => row.status)).toEqual(['unknown', 'unknown', 'sent'])
          expect(w.waits.filter((wait) => wait.failover === 'resend' && wait.paused)).toHaveLength(2)
        }),
      ],
      { vars: { CIRCUIT_FAILURES: '2' }, inApp: true },
    )
    expect(violations).toEqual([])
    for (const row of await routed()) {
      expect(row.status).toBe('sent')
      expect(acceptedThrough(world, row.id)).toHaveLength(1)
    }
  })

  // Found by the model (seed 562719562, two databases, 1,000 runs): the binding down, two emails that may have
  // gone out through it, its circuit open, then its sender refused while Resend works. Each went through the
  // cron three times (sent again after its unknown outcome, its wait to fail over, its send through Resend),
  // and the drain's clock jumped an hour each time the cron enqueued it: a stall of the model, not the Worker's.
  it('cloudflare, then resend: two emails that may have gone out before the binding’s circuit opened go through resend while the binding refuses', async () => {
    const { violations, world } = await run(
      ['cloudflare', 'resend'],
      [
        providerState('down', true),
        mail('invitation', 0),
        deliver('DISPATCH'),
        mail('invitation', 0),
        advance(125),
        deliver('DISPATCH'),
        mail('invitation', 0),
      ],
      { vars: { CIRCUIT_FAILURES: '2' }, inApp: true },
    )
    expect(violations).toEqual([])
    const rows = await routed()
    expect(rows.map((row) => [row.status, row.transport])).toEqual([
      ['sent', 'resend'],
      ['sent', 'resend'],
      ['sent', 'resend'],
    ])
    for (const row of rows) expect(acceptedThrough(world, row.id)).toEqual(['resend'])
  })

  it.each(ORDERS)(
    '%s: an outage of the first opens its circuit, new mail goes through the second; an accepted probe closes it',
    async (_, order) => {
      const { violations, world } = await run(
        order,
        [
          providerState('down', true),
          mail('invitation', 0),
          deliver('DISPATCH'),
          mail('invitation', 2),
          deliver('DISPATCH'),
          step('two failures in a row opened the circuit of the first', async () => {
            const pauses = await allRows('SELECT transport, code FROM transport_pauses')
            expect(pauses).toEqual([{ transport: order[0], code: 'circuit-open' }])
          }),
          // The two may have gone out through the first: they wait for its events, none come, the second sends them.
          advance(601),
          cron(),
          deliver('DISPATCH'),
          deliver('DISPATCH'),
          mail('invitation', 0),
          deliver('DISPATCH'),
          providerState('down', false),
          advanceToProbe(),
          cron(),
          deliver('DISPATCH'),
          mail('invitation', 2),
          deliver('DISPATCH'),
          step('the probe through the first was accepted: the circuit is closed', async () => {
            expect(await allRows('SELECT transport FROM transport_pauses')).toEqual([])
          }),
        ],
        { vars: { CIRCUIT_FAILURES: '2' } },
      )
      expect(violations).toEqual([])
      const rows = await routed()
      for (const row of rows) expect(acceptedThrough(world, row.id)).toHaveLength(1)
      expect(rows.map((row) => row.transport)).toEqual([order[1], order[1], order[1], order[0]])
    },
  )
})
