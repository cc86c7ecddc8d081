import { maybeSentAt } from './sql.ts'

/**
 * Which email transport a notification goes through, as SQL for the claim
 * and the gates that run before it in the same transaction, so the choice
 * and the state it is made on (`transport_pauses`) are one. Every fragment
 * takes `list`, the SQL expression of the configured transports as a JSON
 * array in order (config.transports). A transport is usable when it has no
 * row in `transport_pauses`: neither paused (a refusal about our
 * configuration) nor with its circuit open (repeated failures that say the
 * provider may be down), which are both kept there.
 */

/**
 * The transports that send bundles (several emails in one request): Resend's
 * `POST /emails/batch`. The binding sends one message per call.
 */
const BUNDLING = "('resend')"

/**
 * The pause `p`'s probe, and — for a transport that sends bundles — the
 * members of its batch while the probe itself is still to be sent (a batch
 * is sent whole: its probe is all of it). Through one that does not, a
 * member probes alone and leaves its batch (src/dispatch/stages/bundle.ts):
 * one request, not one per member. A probe that went its own way meanwhile
 * takes no batch with it. Never NULL (a probe without a batch, a member
 * without one): `NOT` of it must be true for every other row.
 *
 * @param p - alias of the transport_pauses row
 * @param row - alias of the notifications row
 */
export function probeOf(p: string, row: string): string {
  return `(${p}.probe_id = ${row}.id
    OR (${p}.transport IN ${BUNDLING} AND coalesce(${row}.batch_id = (SELECT n.batch_id FROM notifications n
        WHERE n.id = ${p}.probe_id AND n.status IN ('paused', 'pending', 'sending')), 0)))`
}

/** The first configured transport: what a notification tried before migration 0026 went through. */
export function firstTransport(list: string): string {
  return `(SELECT value FROM json_each(${list}) WHERE key = 0)`
}

/** The first configured transport with no pause and no open circuit, or NULL when none is usable. */
export function firstUsable(list: string): string {
  return `(SELECT t.value FROM json_each(${list}) t
    WHERE NOT EXISTS (SELECT 1 FROM transport_pauses u WHERE u.transport = t.value) ORDER BY t.key LIMIT 1)`
}

/** The transport of the notification's latest try (written by its claim). */
export function triedThrough(list: string): string {
  return `coalesce(notifications.transport, ${firstTransport(list)})`
}

/**
 * Whether the notification may have gone out through a transport still
 * configured: its next try must go through that one — the same request
 * under the same key, or, through the binding, after its delivery events had
 * their chance — never through another while the first may have sent it. A
 * `sending` row being taken over counts (`maybeSentAt`).
 */
export function pinned(list: string): string {
  return `((${maybeSentAt('notifications')} IS NOT NULL OR notifications.provider_id IS NOT NULL)
    AND ${triedThrough(list)} IN (SELECT value FROM json_each(${list})))`
}

/** The pause that names the notification as its probe (or a member of the probe's batch), by its transport's place. */
function probingTransport(list: string): string {
  return `(SELECT p.transport FROM transport_pauses p JOIN json_each(${list}) t ON t.value = p.transport
    WHERE p.probe_id IS NOT NULL AND ${probeOf('p', 'notifications')} ORDER BY t.key LIMIT 1)`
}

/**
 * The transport a claimed email goes through: when it may have gone out, the
 * transport it may have gone through (the gates before the claim stopped it
 * if that one is not usable, unless it is that one's probe); else the paused
 * transport it is the probe of; else the first usable. The gates let
 * nothing else through when none is usable; the first configured closes the
 * expression all the same.
 */
export function routeOf(list: string): string {
  return `coalesce(CASE WHEN ${pinned(list)} THEN ${triedThrough(list)} END, ${probingTransport(list)},
    ${firstUsable(list)}, ${firstTransport(list)})`
}

/**
 * Whether the notification is the probe of a pause (or of a member of its batch).
 * The gates let it through to its transport: how a paused transport is tried.
 */
export function isProbe(list: string): string {
  return `${probingTransport(list)} IS NOT NULL`
}
