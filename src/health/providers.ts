/**
 * Each configured email transport's state, one home for the console, the
 * doctor and `/metrics`: `active`, the first usable one, which carries the
 * mail; `standby`, usable behind it; `paused`, by a refusal about our own
 * configuration; `circuit-open`, after failures in a row that say the
 * provider may be down. A transport is usable when it has no row in
 * `transport_pauses` (src/notifications/route.ts); each D1 shard keeps its
 * own, and a pause in any shard is the transport's. Free of the Worker's
 * types, as the CLI's doctor applies the findings made of it; the reads are
 * ./transport-reads.ts.
 */
import type { PauseShown } from './types.ts'

/**
 * The code of an open circuit in `transport_pauses`: CIRCUIT_OPEN of
 * src/dispatch/circuit.ts, a module of the Worker (typed with D1's types),
 * which the CLI cannot import; test/health.test.ts holds the two equal.
 */
export const CIRCUIT_OPEN_CODE = 'circuit-open'

/** A configured transport's states, in the order `/metrics` lists them. */
export const PROVIDER_STATES = ['active', 'standby', 'paused', 'circuit-open'] as const

/** What a configured transport is doing now. */
export type ProviderState = (typeof PROVIDER_STATES)[number]

/** A configured transport, its state and, when it is not usable, its pause. */
export type Provider = { transport: string; state: ProviderState; pause?: PauseShown }

/** Each of `transports` (in their order) with its state, from the pauses read. */
export function providersOf(transports: readonly string[], pauses: readonly PauseShown[]): Provider[] {
  let carried = false
  return transports.map((transport): Provider => {
    const pause = pauses.find((found) => found.transport === transport)
    if (pause) return { transport, state: pause.code === CIRCUIT_OPEN_CODE ? 'circuit-open' : 'paused', pause }
    const state = carried ? 'standby' : 'active'
    carried = true
    return { transport, state }
  })
}

/** The transport mail goes through now; undefined when none can send. */
export function carrierOf(providers: readonly Provider[]): string | undefined {
  return providers.find((provider) => provider.state === 'active')?.transport
}

/** Of the pauses of several shards (the primary's first), the first of each transport. */
export function firstPauses(rows: readonly Record<string, unknown>[]): PauseShown[] {
  const pauses = new Map<string, PauseShown>()
  for (const row of rows as readonly PauseShown[]) if (!pauses.has(row.transport)) pauses.set(row.transport, row)
  return [...pauses.values()]
}
