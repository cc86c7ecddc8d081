import { z } from '@hono/zod-openapi'
import type { Context } from 'hono'
import { auditChange } from '../../audit/audit-store.ts'
import { type CancelReport, cancelKeys } from '../../cancel/cancel-key.ts'
import { CancellationKey } from '../../contracts/fields.ts'
import { byColumns, rowsEverywhere } from '../../d1/shards.ts'
import { kindNames } from '../../events/registry.ts'
import { loggerFor } from '../../log.ts'
import { withdrawableKeys } from '../../notifications/cancel.ts'
import { ADMIN_ERRORS, type AppEnv, BODY_ERRORS, createRouter, errors, json, jsonBody } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const OUTCOMES = ['cancelled', 'withdrawn', 'in-flight', 'too-late', 'ended'] as const

const Report = z
  .object({
    key: z.string(),
    cancelledAt: z.string().openapi({ description: 'when the key was first cancelled (a second cancel keeps it)' }),
    source: z.enum(['event', 'api']).openapi({ description: 'what first cancelled it: an event, or an operator' }),
    notifications: z.array(
      z.object({
        id: z.string(),
        eventId: z.string(),
        kind: z.string(),
        channel: z.string(),
        recipientUserId: z.string(),
        status: z.string().openapi({ description: 'its status after the cancellation' }),
        outcome: z.enum(OUTCOMES).openapi({
          description:
            '`cancelled`: it had not gone out and never will (but see `unconfirmedThrough`); `withdrawn`: an in-app item that was shown, removed from its feed and open pages; `in-flight`: being sent as the cancellation came — it goes, or, if that try fails, it is cancelled at its retry (its status in the event’s story says which); `too-late`: it went out (an email sent, or told in a digest already closed); `ended`: it had ended without going out',
        }),
        unconfirmedThrough: z.array(z.string()).openapi({
          description:
            'the transports that took a try of this email and never reported on it: each try was taken as not sent (when the email went on to the next transport, when a cancellation that came while its outcome was unknown ended it, or when an operator replayed it), so it may have gone out through them, whatever the outcome says (its reason says so too); empty when there was none',
        }),
      }),
    ),
  })
  .openapi('CancelReport')

const cancel = operatorRoute('admin', {
  method: 'post',
  path: '/',
  summary: 'Cancel a key: withdraw what it notified that has not gone out',
  description:
    'Records the cancellation of the key and withdraws every notification of it that has not gone out: pending, waiting for a contact, paused, held by quiet hours, waiting to escalate, or told in a digest still collecting (the digest closes without it; one left empty sends nothing). An in-app item already shown is withdrawn from its feed and from open pages, and the unread count follows. An email being sent as the cancel comes is reported `in-flight`; one that went, `too-late`. An event of the key that arrives later creates nothing. Saying it again changes nothing more and answers the same. Audited.',
  request: {
    body: jsonBody(
      z
        .object({
          key: CancellationKey.openapi({
            description: 'the cancellation key the events carry (e.g. `invitation:{id}`)',
          }),
          reason: z.string().trim().min(1).max(500).optional().openapi({ description: 'why, for the stories' }),
        })
        .strict(),
    ),
  },
  responses: { 200: json(Report, 'What the cancellation did'), ...errors(...BODY_ERRORS, ...ADMIN_ERRORS) },
})

/** The most keys one bulk cancellation takes; the rest are the next call's. */
const BULK_MAX = 100

const Filter = z
  .object({
    kind: z
      .enum(kindNames() as [string, ...string[]])
      .optional()
      .openapi({ description: 'only notifications of this kind' }),
    recipientUserId: z.string().min(1).max(256).optional().openapi({ description: 'only this recipient’s' }),
    keyPrefix: z.string().min(1).max(200).optional().openapi({ description: 'only keys that start with this' }),
    createdAfter: z.iso.datetime().optional().openapi({ description: 'only notifications written after this time' }),
    createdBefore: z.iso.datetime().optional().openapi({ description: 'only notifications written before this time' }),
  })
  .strict()
  .refine((filter) => Object.keys(filter).length > 0, { message: 'a bulk cancellation needs at least one filter' })

const bulk = operatorRoute('admin', {
  method: 'post',
  path: '/bulk',
  summary: 'Cancel every key whose notifications match a filter (with a dry run)',
  description: `Finds the cancellation keys of notifications that match the filter and have not gone out (at most ${BULK_MAX}, oldest first; \`more\` says whether others match), and — unless \`dryRun\` — cancels each as POST /v1/cancellations does. \`dryRun\` is true unless set to false. Audited.`,
  request: {
    body: jsonBody(
      z
        .object({
          filter: Filter,
          dryRun: z.boolean().default(true).openapi({ description: 'list what would be cancelled, change nothing' }),
          reason: z.string().trim().min(1).max(500).optional(),
        })
        .strict(),
    ),
  },
  responses: {
    200: json(
      z
        .object({
          dryRun: z.boolean(),
          more: z.boolean().openapi({ description: `more than ${BULK_MAX} keys match: call again for the rest` }),
          keys: z.array(
            z.object({
              key: z.string(),
              waiting: z.number().int().openapi({
                description:
                  'its notifications that match the filter and had not gone out (the cancellation withdraws every notification of the key, matching or not)',
              }),
              outcomes: z
                .record(z.string(), z.number().int())
                .nullable()
                .openapi({ description: 'what the cancellation did, by outcome (null in a dry run)' }),
            }),
          ),
        })
        .openapi('BulkCancelReport'),
      'What matched, and what was done',
    ),
    ...errors(...BODY_ERRORS, ...ADMIN_ERRORS),
  },
})

/**
 * Cancels keys for the request's operator (all at once: src/cancel/) and
 * audits each (one row per key, counting what it withdrew; the cancellation
 * itself is a change, whatever it found).
 */
async function cancelAudited(
  c: Context<AppEnv>,
  keys: readonly string[],
  reason: string | null,
): Promise<CancelReport[]> {
  const operator = c.get('operator')
  const reports = await cancelKeys(
    c.env,
    keys.map((key) => ({ key, source: 'api' as const, by: operator.name, reason })),
    new Date(),
    loggerFor(c.env),
  )
  const at = new Date().toISOString()
  await c.env.DB.batch(
    reports.map((report) =>
      auditChange(
        c.env.DB,
        operator,
        {
          action: 'cancellation.create',
          target: report.key,
          parameters: { reason, notifications: report.notifications.length },
          affected: Math.max(
            1,
            report.notifications.filter((n) => n.outcome === 'cancelled' || n.outcome === 'withdrawn').length,
          ),
        },
        at,
      ),
    ),
  )
  return reports
}

/** `/v1/cancellations`: withdraw what a key notified and has not gone out. */
export const cancellations = createRouter()
  .openapi(cancel, async (c) => {
    const { key, reason } = c.req.valid('json')
    const [report] = await cancelAudited(c, [key], reason ?? null)
    return c.json(report as CancelReport, 200)
  })
  .openapi(bulk, async (c) => {
    const { filter: asked, dryRun, reason } = c.req.valid('json')
    // As the rows keep times (toISOString): a bound given without milliseconds compares as the same instant.
    const filter = {
      ...asked,
      ...(asked.createdAfter ? { createdAfter: new Date(asked.createdAfter).toISOString() } : {}),
      ...(asked.createdBefore ? { createdBefore: new Date(asked.createdBefore).toISOString() } : {}),
    }
    const [found = []] = await rowsEverywhere(c.env, (db) => [withdrawableKeys(db, filter, BULK_MAX + 1)])
    // Each shard's oldest first; merged, the oldest of all.
    const merged = new Map<string, { key: string; waiting: number; first: string }>()
    for (const row of (found as { key: string; waiting: number; first: string }[]).sort(byColumns('first', 'key'))) {
      const known = merged.get(row.key)
      merged.set(row.key, {
        key: row.key,
        waiting: (known?.waiting ?? 0) + row.waiting,
        first: known?.first ?? row.first,
      })
    }
    const matched = [...merged.values()]
    const taken = matched.slice(0, BULK_MAX)
    const more = matched.length > BULK_MAX
    if (dryRun || taken.length === 0) {
      return c.json({ dryRun, more, keys: taken.map(({ key, waiting }) => ({ key, waiting, outcomes: null })) }, 200)
    }
    const reports = await cancelAudited(
      c,
      taken.map(({ key }) => key),
      reason ?? null,
    )
    const keys = taken.map(({ key, waiting }) => {
      const outcomes: Record<string, number> = {}
      for (const entry of reports.find((report) => report.key === key)?.notifications ?? [])
        outcomes[entry.outcome] = (outcomes[entry.outcome] ?? 0) + 1
      return { key, waiting, outcomes }
    })
    return c.json({ dryRun, more, keys }, 200)
  })
