/**
 * The row of a transport pause (`transport_pauses`), as its readers see it.
 * Apart from src/dispatch/pause.ts so that the doctor's rules, which the CLI
 * shares, can name it without the Worker's runtime types.
 */
/** What the claim stage, the console and the doctor read of a pause. */
export type TransportPause = {
  transport: string
  code: string
  reason: string
  since: string
  failures: number
  probe_at: string
  probe_id: string | null
}
