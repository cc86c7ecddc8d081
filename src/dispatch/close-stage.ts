import { PipelineError } from '../errors.ts'
import { DIGEST_TEMPLATE_SUFFIX, digestKindNames } from '../events/registry.ts'
import { renderNotification } from '../materialize/plan.ts'
import {
  type ClosingDigest,
  closeDigest,
  closingDigests,
  type DigestMemberRow,
  digestMembers,
  endDigest,
  fenceDigests,
} from '../notifications/digest.ts'
import type { TemplateSource } from '../templates/render.ts'
import { activeTemplatesOf, templatesOf } from '../templates/store.ts'
import type { Later } from './claim-stage.ts'
import { dispatchFor } from './message.ts'
import type { DispatchRun } from './run.ts'

/** A message whose digest is due to close. */
export type ToClose = { message: Message<unknown>; id: string }

type Rendered = Awaited<ReturnType<typeof renderNotification>>

/**
 * Closes the due digests of a dispatch batch, each exactly once: one D1 batch
 * fences them (`collecting → closing`: an event that arrives from now on
 * opens the next digest) and reads, after the fence and in its transaction,
 * exactly the members it closed in, and the templates; each digest is then
 * rendered — its kind's digest template with `items` and `count`, or, for a
 * digest of one, the kind's own template with that one's data, as it would
 * have gone at once — and a second batch writes each `closing → pending` with
 * its content, under the fence. A closed digest's message goes back on the
 * queue for its send time (now, or when quiet hours end), where the claim
 * takes it like any notification: gates, pause, pace, batches, retries. A
 * close that dies between the two writes leaves `closing`, which a later
 * message (or the cron) closes again with the same content.
 */
export async function closeStage(run: DispatchRun, due: readonly ToClose[], later: Later[]): Promise<void> {
  if (due.length === 0) return
  const ids = JSON.stringify([...new Set(due.map((entry) => entry.id))])
  const { env, config, nowIso } = run
  let digests: ClosingDigest[]
  let members: DigestMemberRow[]
  let templates: TemplateSource[]
  try {
    const keys = digestKindNames().flatMap((kind) => [kind, `${kind}${DIGEST_TEMPLATE_SUFFIX}`])
    const [, closing, told, stored] = await env.DB.batch([
      fenceDigests(env.DB, ids, nowIso),
      closingDigests(env.DB, ids),
      digestMembers(env.DB, ids, config.DIGEST_MAX_ITEMS),
      activeTemplatesOf(env.DB, keys),
    ])
    digests = (closing?.results ?? []) as ClosingDigest[]
    members = (told?.results ?? []) as DigestMemberRow[]
    templates = templatesOf(stored, keys)
  } catch (cause) {
    failAll(run, due, cause, 'D1 digest close')
    return
  }
  const byDigest = Map.groupBy(members, (member) => member.digest_id)
  const writes: D1PreparedStatement[] = []
  const outcomes = new Map<string, { rendered?: Rendered; empty?: boolean }>()
  for (const digest of digests) {
    const told = byDigest.get(digest.id) ?? []
    if (told.length === 0) {
      // Nothing joined it: a digest opens with its first member, so this is a row written by hand.
      writes.push(endDigest(env.DB, digest.id, 'superseded', null, 'the digest told no notification', nowIso))
      outcomes.set(digest.id, { empty: true })
      continue
    }
    const rendered = await renderDigest(run, digest, told, templates)
    outcomes.set(digest.id, { rendered })
    if ('error' in rendered) {
      const { code, message } = rendered.error
      writes.push(endDigest(env.DB, digest.id, 'failed', code, message, nowIso))
      continue
    }
    const newest = told[told.length - 1] as DigestMemberRow
    writes.push(
      closeDigest(
        env.DB,
        {
          id: digest.id,
          subject: rendered.subject as string,
          textBody: rendered.textBody as string,
          htmlBody: rendered.htmlBody,
          templateVersion: rendered.templateVersion as number,
          locale: rendered.locale as string,
          timeZone: newest.time_zone,
          recipientEmail: newest.recipient_email,
          recipientName: newest.recipient_name,
          recipientHash: newest.recipient_hash,
          unsubscribeUrl: rendered.unsubscribeUrl,
          size: newest.total,
          scheduledAt: rendered.scheduledAt,
        },
        nowIso,
      ),
    )
  }
  let closed: Map<string, string>
  try {
    const results = writes.length > 0 ? await env.DB.batch(writes) : []
    closed = new Map(
      results.flatMap((result) =>
        ((result.results ?? []) as { id: string; scheduled_at: string }[]).map((row) => [row.id, row.scheduled_at]),
      ),
    )
  } catch (cause) {
    failAll(run, due, cause, 'D1 digest write')
    return
  }
  settleClosed(run, due, outcomes, closed, later)
}

/** Each message after the close: its digest's email enqueued, a dead letter for a digest that failed, else done with. */
function settleClosed(
  run: DispatchRun,
  due: readonly ToClose[],
  outcomes: ReadonlyMap<string, { rendered?: Rendered; empty?: boolean }>,
  closed: ReadonlyMap<string, string>,
  later: Later[],
): void {
  const enqueued = new Set<string>()
  for (const { message, id } of due) {
    const scheduledAt = closed.get(id)
    const outcome = outcomes.get(id)
    if (scheduledAt && !enqueued.has(id)) {
      enqueued.add(id)
      later.push({ message, outgoing: dispatchFor(id, scheduledAt, run.now) })
      run.log.info('digest.closed', { notificationId: id })
    } else if (outcome?.rendered && 'error' in outcome.rendered && !enqueued.has(id)) {
      enqueued.add(id)
      const { code, message: error } = outcome.rendered.error
      run.settle(message, { action: 'dead-letter', code, error })
      run.log.error('digest.failed', { notificationId: id, code, error })
    } else {
      // Closed by another delivery meanwhile, empty, or named twice in the batch.
      run.settle(message, { action: 'ack' })
      if (outcome?.empty) run.log.warn('digest.empty', { notificationId: id })
    }
  }
}

/**
 * A digest's email: the kind's digest template with `items` (the first
 * DIGEST_MAX_ITEMS members' data, oldest first) and `count` (all of them); a
 * digest of one renders the kind's own template with that one's data. The
 * newest member's recipient snapshot (name, locale, zone) is the one used.
 */
async function renderDigest(
  run: DispatchRun,
  digest: ClosingDigest,
  told: readonly DigestMemberRow[],
  templates: readonly TemplateSource[],
): Promise<Rendered> {
  const newest = told[told.length - 1] as DigestMemberRow
  const count = newest.total
  const items = told.filter((member) => member.position <= run.config.DIGEST_MAX_ITEMS).map(modelOf)
  const subject =
    count === 1
      ? { kind: digest.kind, urgency: digest.urgency, model: items[0] ?? {} }
      : {
          kind: digest.kind,
          urgency: digest.urgency,
          model: { items, count },
          template: `${digest.kind}${DIGEST_TEMPLATE_SUFFIX}`,
        }
  const recipient = {
    userId: digest.recipient_user_id,
    name: newest.recipient_name,
    locale: newest.locale ?? run.config.DEFAULT_LOCALE,
    timeZone: newest.time_zone ?? run.config.DEFAULT_TIME_ZONE,
  }
  return renderNotification(
    subject,
    recipient,
    { channel: digest.channel, isFallback: false },
    templates,
    run.config,
    run.now,
  )
}

function modelOf(member: DigestMemberRow): Record<string, unknown> {
  try {
    return member.model ? (JSON.parse(member.model) as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

function failAll(run: DispatchRun, due: readonly ToClose[], cause: unknown, what: string): void {
  const error = new PipelineError('NTF_DEPENDENCY_FAILED', `${what}: ${(cause as Error).message}`, { cause })
  for (const { message } of due) run.fail(message, error)
}
