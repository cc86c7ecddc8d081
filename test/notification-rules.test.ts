/**
 * The notification's rules that are written twice — once in TypeScript for
 * planning, once in SQL for the claim — and the status list that the D1
 * CHECK constraint repeats: each pair is run on the same inputs here, so a
 * change to one side that the other does not follow fails.
 */
import { env } from 'cloudflare:workers'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type DecisionRef, sameDecision } from '../src/notifications/decision.ts'
import { sameDecisionSql } from '../src/notifications/sql.ts'
import { NOTIFICATION_STATUSES } from '../src/notifications/status.ts'

const WINDOW_SECONDS = 300

/**
 * The SQL rule on two decisions: `notifications` and `o` are one-row CTEs shadowing the table, on one
 * channel (the SQL asks for the same channel too, which an event's decision in planning is for every one).
 */
async function sameInSql(
  a: DecisionRef,
  b: DecisionRef,
  channels: [string, string] = ['email', 'email'],
): Promise<boolean> {
  const row = await env.DB.prepare(
    `WITH notifications AS (SELECT ?1 AS decision_person, ?2 AS decision_request, ?3 AS decision_at, ?8 AS channel),
          o AS (SELECT ?4 AS decision_person, ?5 AS decision_request, ?6 AS decision_at, ?9 AS channel)
     SELECT CASE WHEN ${sameDecisionSql('o', '?7')} THEN 1 ELSE 0 END AS same FROM notifications, o`,
  )
    .bind(a.person, a.request, a.at, b.person, b.request, b.at, WINDOW_SECONDS, channels[0], channels[1])
    .first<{ same: number }>()
  return row?.same === 1
}

const base = Date.parse('2026-11-01T10:00:00.000Z')
const decision = fc.record({
  person: fc.constantFrom('p1:approved', 'p1:rejected', 'p2:approved'),
  request: fc.option(fc.constantFrom('r1', 'r2'), { nil: null }),
  // Around the window's edge: 0 … 2 windows apart, to the millisecond.
  at: fc.option(
    fc.integer({ min: 0, max: 2 * WINDOW_SECONDS * 1000 }).map((ms) => new Date(base + ms).toISOString()),
    { nil: null },
  ),
})

describe('rules written in TypeScript and in SQL agree', () => {
  it('sameDecision (planning) and sameDecisionSql (claim) decide every pair alike', async () => {
    // The exact edge first: 300 s apart matches, 300.001 s does not, in both.
    const edge = (ms: number): [DecisionRef, DecisionRef] => [
      { person: 'p1:approved', request: null, at: new Date(base).toISOString() },
      { person: 'p1:approved', request: 'r1', at: new Date(base + ms).toISOString() },
    ]
    for (const [a, b] of [edge(300_000), edge(300_001)]) expect(await sameInSql(a, b)).toBe(sameDecision(a, b, 300))
    expect(sameDecision(...edge(300_000), 300)).toBe(true)
    expect(sameDecision(...edge(300_001), 300)).toBe(false)
    // One decision's email and in-app item are two deliveries: neither supersedes nor holds the other.
    expect(await sameInSql(...edge(0), ['email', 'in-app'])).toBe(false)
    await fc.assert(
      fc.asyncProperty(decision, decision, async (a, b) => {
        expect(await sameInSql(a, b)).toBe(sameDecision(a, b, WINDOW_SECONDS))
      }),
      { numRuns: 300 },
    )
  })

  it('the D1 CHECK constraint accepts exactly NOTIFICATION_STATUSES', async () => {
    const insert = (id: string, status: string) =>
      env.DB.prepare(
        `INSERT INTO notifications (id, idempotency_key, event_id, source, kind, channel, urgency, recipient_user_id,
           status, scheduled_at, created_at, updated_at, is_digest, digest_id)
         VALUES (?1, ?1, ?1, 'test', 'ResponseCreated', 'email', 'normal', ?1, ?2, ?3, ?3, ?3,
           -- a digest's own statuses are a digest's; a digested notification names its digest
           CASE WHEN ?2 IN ('collecting', 'closing') THEN 1 ELSE 0 END,
           CASE WHEN ?2 = 'digested' THEN 'rules-digest' END)`,
      )
        .bind(id, status, new Date(base).toISOString())
        .run()
    for (const status of NOTIFICATION_STATUSES) {
      await expect(insert(`rules-status-${status}`, status)).resolves.toBeTruthy()
    }
    await expect(insert('rules-status-unknown', 'no-such-status')).rejects.toThrow(/CHECK constraint failed/)
  })
})
