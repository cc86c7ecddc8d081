import { primaryDb, withOperatorReads } from '../../d1/shards.ts'
import { notificationDeadLetter } from '../../dead-letters/notification.ts'
import { PipelineError } from '../../errors.ts'
import { DIGEST_TEMPLATE_SUFFIX, digestKindNames } from '../../events/registry.ts'
import {
  type ClosingDigest,
  closeDigest,
  closingDigests,
  type DigestMemberRow,
  digestMembers,
  endDigest,
  fenceDigests,
  sendMemberAlone,
} from '../../notifications/digest.ts'
import { dispatchFor } from '../../queue/dispatch-message.ts'
import { renderNotification } from '../../templates/render-notification.ts'
import type { TemplateSource } from '../../templates/sandbox.ts'
import { activeTemplatesOf, templatesOf } from '../../templates/template-store.ts'
import type { DispatchRun, Later, ToClose } from '../run.ts'

type Rendered = Awaited<ReturnType<typeof renderNotification>>

/**
 * Closes the due digests of a dispatch batch, each exactly once: one D1 transaction
 * fences them (`collecting → closing`: an event that arrives from now on
 * opens the next digest) and reads, after the fence and in its transaction,
 * exactly the members it closed in, and the templates; each digest is then
 * rendered with its kind's digest template, `items` and `count`, and a
 * second transaction writes each `closing → pending` with its content, under the
 * fence — except a digest of one, whose only notification goes out as
 * itself, rendered as it would have gone at once, and supersedes the digest.
 * What a close sends goes back on the queue for its send time (now, or when quiet hours end), where the claim
 * takes it like any notification: gates, pause, pace, bundles, retries. A
 * close that dies between the two writes leaves `closing`, which a later
 * message (or the cron) closes again with the same content. Returns the
 * messages of what the closes send, for their send times.
 */
export async function closeDigestStage(run: DispatchRun, due: readonly ToClose[]): Promise<Later[]> {
  const later: Later[] = []
  if (due.length === 0) return later
  const ids = JSON.stringify([...new Set(due.map((entry) => entry.id))])
  const { env, config, nowIso } = run
  let digests: ClosingDigest[]
  let members: DigestMemberRow[]
  let templates: TemplateSource[]
  try {
    const keys = digestKindNames().flatMap((kind) => [kind, `${kind}${DIGEST_TEMPLATE_SUFFIX}`])
    const [[, closing, told], [stored]] = await withOperatorReads(
      env,
      [
        fenceDigests(env.DB, ids, nowIso),
        closingDigests(env.DB, ids),
        digestMembers(env.DB, ids, config.DIGEST_MAX_ITEMS),
      ],
      [activeTemplatesOf(primaryDb(env), keys)],
    )
    digests = (closing?.results ?? []) as ClosingDigest[]
    members = (told?.results ?? []) as DigestMemberRow[]
    templates = templatesOf(stored, keys)
  } catch (cause) {
    failAll(run, due, cause, 'D1 digest close')
    return later
  }
  const byDigest = Map.groupBy(members, (member) => member.digest_id)
  const writes: D1PreparedStatement[] = []
  const outcomes = new Map<string, Outcome>()
  for (const digest of digests) {
    const told = byDigest.get(digest.id) ?? []
    const outcome = await closeOne(run, digest, told, templates)
    outcomes.set(digest.id, outcome)
    writes.push(...outcome.writes)
  }
  // What each write sent on: the digest (or its only member) with its send time.
  let sendable: Map<string, string>
  try {
    const results = writes.length > 0 ? await env.DB.batch(writes) : []
    sendable = new Map(
      results.flatMap((result) =>
        ((result.results ?? []) as { id: string; scheduled_at: string }[]).map((row) => [row.id, row.scheduled_at]),
      ),
    )
  } catch (cause) {
    failAll(run, due, cause, 'D1 digest write')
    return later
  }
  settleClosed(run, due, outcomes, sendable, later)
  return later
}

/** What the close of one digest writes, and which notification then goes out (the digest, or its only member). */
type Outcome = { writes: D1PreparedStatement[]; sends?: string; failed?: PipelineError; empty?: boolean }

/**
 * The close of one fenced digest: nothing told (a row written by hand) ends
 * it; one notification told goes out as itself — its own email, as it would
 * have gone at once, and the digest is superseded by it; more become the
 * digest's email. A template that fails ends the digest `failed`.
 */
async function closeOne(
  run: DispatchRun,
  digest: ClosingDigest,
  told: readonly DigestMemberRow[],
  templates: readonly TemplateSource[],
): Promise<Outcome> {
  const { env, nowIso } = run
  const newest = told[told.length - 1]
  if (!newest) {
    return {
      writes: [endDigest(env.DB, digest.id, 'superseded', null, 'the digest told no notification', nowIso)],
      empty: true,
    }
  }
  const rendered = await renderDigest(run, digest, told, templates)
  if ('error' in rendered) {
    const { code, message } = rendered.error
    // Its dead letter with its status: a digest never fails unseen.
    const letter = await notificationDeadLetter(env.DB, digest, {
      status: 'failed',
      code,
      error: message,
      attempts: Math.max(1, digest.send_attempts),
      at: nowIso,
    })
    return { writes: [endDigest(env.DB, digest.id, 'failed', code, message, nowIso), letter], failed: rendered.error }
  }
  const content = {
    subject: rendered.subject as string,
    textBody: rendered.textBody as string,
    htmlBody: rendered.htmlBody,
    templateVersion: rendered.templateVersion as number,
    locale: rendered.locale as string,
    unsubscribeUrl: rendered.unsubscribeUrl,
    scheduledAt: rendered.scheduledAt,
  }
  if (newest.total === 1) {
    return {
      // The member first: it moves only while its digest is still fenced, which the second ends.
      writes: [
        sendMemberAlone(env.DB, newest.id, digest.id, content, nowIso),
        endDigest(env.DB, digest.id, 'superseded', null, 'it told one notification, sent as itself', nowIso, 1),
      ],
      sends: newest.id,
    }
  }
  const recipient = {
    timeZone: newest.time_zone,
    recipientEmail: newest.recipient_email,
    recipientName: newest.recipient_name,
    recipientHash: newest.recipient_hash,
  }
  return {
    writes: [closeDigest(env.DB, { id: digest.id, ...content, ...recipient, size: newest.total }, nowIso)],
    sends: digest.id,
  }
}

/**
 * Each message after the close: what its digest sends enqueued for its send
 * time, a dead letter for a digest that failed, else done with (closed by
 * another delivery meanwhile, empty, or named twice in the batch).
 */
function settleClosed(
  run: DispatchRun,
  due: readonly ToClose[],
  outcomes: ReadonlyMap<string, Outcome>,
  sendable: ReadonlyMap<string, string>,
  later: Later[],
): void {
  const settled = new Set<string>()
  for (const { message, id } of due) {
    const outcome = outcomes.get(id)
    const sends = outcome?.sends
    const scheduledAt = sends ? sendable.get(sends) : undefined
    if (settled.has(id) || !outcome) {
      run.ack(message)
    } else if (sends && scheduledAt) {
      settled.add(id)
      later.push({ message, outgoing: dispatchFor(sends, scheduledAt, run.now) })
      run.log.info('digest.closed', { notificationId: id, sends })
    } else if (outcome.failed) {
      // Its dead letter was written with its status.
      settled.add(id)
      run.ack(message)
      const { code, message: error } = outcome.failed
      run.log.error('digest.failed', { notificationId: id, code, error })
    } else {
      run.ack(message)
      if (outcome.empty) run.log.warn('digest.empty', { notificationId: id })
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
