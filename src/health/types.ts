/**
 * What the doctor judges and what it says: a plain description of a
 * deployment — made by the Worker of itself (`GET /v1/health/config`) or by
 * the CLI of a local wrangler.toml — and its findings. The rules are in
 * ./findings.ts, one home for the Worker, the console and the CLI.
 */
import type { ConfigIssue } from '../config.ts'

/** `blocker`: no email is delivered until it is fixed; `warning`: something else breaks; `info`: worth knowing. */
export type Severity = 'blocker' | 'warning' | 'info'

/** One thing that stands between a deployment and a delivered email, and what fixes it. */
export type Finding = {
  id: string
  severity: Severity
  message: string
  /** The command or setting that fixes it. */
  fix: string
}

/** What Resend said about the sender's domain (`GET /domains`), when it was asked. */
export type DomainCheck =
  | { outcome: 'verified' }
  | { outcome: 'unverified'; status: string }
  | { outcome: 'not-found'; listed: number }
  /** A sending-only key may not list domains (401 `restricted_api_key`). */
  | { outcome: 'restricted-key' }
  /** Resend refused the key itself (401 `missing_api_key`, 403 `invalid_api_key`). */
  | { outcome: 'key-refused'; detail: string }
  /** No answer in time, or one that says nothing about the domain. */
  | { outcome: 'unanswered'; detail: string }

/** A stored template in effect that does not render its kind's example within the configured limits. */
export type TemplateRefusal = {
  /** `kind/locale/channel version N`. */
  template: string
  /** Why, naming the part and the limit. */
  message: string
  /** Whether it parses at all: one that does not refuses every event; one that does, at least its example. */
  parses: boolean
}

/** A deployment as the rules see it; what a source cannot see is undefined, and its rules are skipped. */
export type Deployment = {
  /** `worker`: the deployed Worker describing itself; `wrangler.toml`: a local file, before a deploy. */
  source: 'worker' | 'wrangler.toml'
  /** The variables as set, as strings; no secret among them. */
  vars: Readonly<Record<string, string | undefined>>
  /** Names of the secrets that are set; undefined where they cannot be seen (a wrangler.toml). */
  secrets?: readonly string[]
  /** Secrets written in plain text among the variables (a wrangler.toml's [vars]). */
  exposedSecrets?: readonly string[]
  /** What the configuration schema refuses, by variable. */
  invalid: readonly ConfigIssue[]
  /** Names of the bindings present: D1, KV, queue producers, send_email, the send pace. */
  bindings: readonly string[]
  /** Queues this Worker consumes; undefined where unknown (a Worker cannot see its own consumers). */
  consumers?: readonly string[]
  /** Cron schedules; undefined where unknown (a Worker cannot see its own triggers). */
  crons?: readonly string[]
  /** Resources still carrying the repository's placeholder id, e.g. `D1 database DB`. */
  placeholderResources?: readonly string[]
  /** When the maintenance cron last ran: null never, undefined unknown. */
  cronLastRun?: string | null
  /** Why the Worker's D1 database could not be read (the pauses and the cron's last run are then unknown). */
  databaseError?: string
  /**
   * The pause or open circuit of each configured transport that has one (of several D1 shards, the
   * first found): empty when every one is usable, undefined unknown.
   */
  pauses?: readonly PauseShown[]
  /** Resend's answer about the sender's domain, when it was asked. */
  domain?: DomainCheck
  /** Stored templates in effect that do not render their example; undefined where not checked (a wrangler.toml, the console's banner). */
  templatesRefused?: readonly TemplateRefusal[]
  now: Date
}

/**
 * A transport's pause as the health report shows it: the fields of its row
 * (src/dispatch/pause.ts) that the findings and the console read; an open
 * circuit is a pause with the code `circuit-open` (src/dispatch/circuit.ts). Kept here,
 * free of the Worker's types, because the CLI's doctor applies the same
 * findings to the report it fetched.
 */
export type PauseShown = {
  /** The paused transport's name. */
  transport: string
  /** The provider's code of the refusal that paused it, or `circuit-open`. */
  code: string
  /** The refusal in the provider's words, addresses masked; of an open circuit, the failures that opened it. */
  reason: string
  /** When the pause began. */
  since: string
  /** When the next probe may be sent. */
  probe_at: string
}
