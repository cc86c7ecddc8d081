/**
 * What the notify-edge bridge and Worker agree on, in one package both import
 * by name: the ingest wire format and its limits, the markers that replace an
 * event that cannot travel, the refusal format of the route, and the masking
 * of personal data in logs.
 */
export * from './inbound.ts'
export * from './issues.ts'
export * from './limits.ts'
export * from './list.ts'
export * from './mask.ts'
export * from './refusal.ts'
