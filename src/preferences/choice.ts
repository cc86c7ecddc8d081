import type { DeliveryMode } from '../events/define.ts'
import { deliveryModeOf, deliveryOf } from '../events/registry.ts'

/**
 * What a recipient may pick for an optional kind on a channel: how it comes
 * (`instant` or `digest`), or not at all (`off`, stored as `enabled = 0`).
 */
export type Choice = DeliveryMode | 'off'

/** The choices of the preference page's form, in the order it lists them. */
export const CHOICES = ['instant', 'digest', 'off'] as const satisfies readonly Choice[]

/** The modes a kind offers on a channel: `digest` only where it declares one, since there is nothing else to gather into. */
export function modesOf(kind: string, channel: string): DeliveryMode[] {
  return deliveryOf(kind, channel).digest ? ['instant', 'digest'] : ['instant']
}

/** Why `mode` cannot be chosen for a kind on a channel, or undefined when it can. */
export function modeRefusal(kind: string, channel: string, mode: DeliveryMode): string | undefined {
  if (modesOf(kind, channel).includes(mode)) return undefined
  return `${kind} has no digest on ${channel}: it is sent at once or not at all`
}

/**
 * What is in effect for a kind on a channel given the recipient's stored row
 * (none: never chosen): off when they turned it off, else the mode planning
 * uses (`deliveryModeOf`) — their choice, else the kind's default, where the
 * kind has a digest; instant where it has none.
 */
export function choiceInEffect(
  kind: string,
  channel: string,
  stored: { enabled: boolean; mode: DeliveryMode | null } | undefined,
): Choice {
  if (stored && !stored.enabled) return 'off'
  return deliveryModeOf(kind, channel, stored?.mode ?? undefined)
}
