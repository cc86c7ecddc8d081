/**
 * What the notify-edge bridge and Worker agree on, in one package both import
 * by name: the ingest wire format and its limits, the markers that replace an
 * event that cannot travel, the refusal format of the route, and how both
 * sides log: one call shape and one scrub of personal data.
 */
export * from './inbound.ts'
export * from './issues.ts'
export * from './limits.ts'
export * from './list.ts'
export * from './log.ts'
export * from './mask.ts'
export * from './refusal.ts'
