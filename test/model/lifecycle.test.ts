import { env } from 'cloudflare:workers'
import fc from 'fast-check'
import { expect, it } from 'vitest'
import { shardDbs } from '../shards.ts'
import { commandArbitraries, failoverArbitraries, ModelViolation } from './commands.ts'
import { settled } from './invariants.ts'
import { type ModelTransports, World } from './world.ts'

/**
 * The lifecycle model: random runs of commands — events of every kind, queue
 * deliveries in any order and again, the provider's faults, D1 failing
 * between two steps, the cron, the clock, an operator's replay, discard,
 * erasure and cancellation (also while a send is in flight), a person's look
 * at their feed — against the real Worker, with the invariants checked after
 * every command and once more when the run's faults are healed and it has
 * run on. fast-check places its three persons in the D1 shards too. A run
 * has one transport (either), or both in either order
 * (EMAIL_TRANSPORTS: failover, its circuit opening after CIRCUIT_FAILURES
 * failures in a row, two or the default five), with failover's commands
 * (./commands.ts `failoverArbitraries`) as often as the others; the summary
 * line says how far those runs went (pauses, circuits, waits to fail over,
 * notifications emailed through both transports as documented).
 * `npm test` runs MODEL_RUNS (100) runs of up to MODEL_COMMANDS (30)
 * commands; `npm run model -- --runs N` runs more. A failure prints its seed
 * and path (replay: `npm run model -- --seed S --path P --replay-path R`, R
 * the counterexample's `replayPath`, with the databases it failed with) and the shrunk
 * command list, which becomes a named test (./sequences.test.ts).
 */
const RUNS = Number(env.MODEL_RUNS)
const COMMANDS = Number(env.MODEL_COMMANDS)
const SEED = env.MODEL_SEED === '' ? Date.now() ^ (Math.random() * 0x100000000) : Number(env.MODEL_SEED)
// A shrunk failure replays only with the commands' own path too (the counterexample's `replayPath`): fast-check
// shrinks a command list by the commands that ran, which the seed and path alone do not say.
const REPLAY = env.MODEL_REPLAY_PATH ? { replayPath: env.MODEL_REPLAY_PATH } : {}

it(
  `the lifecycle model: ${RUNS} runs of up to ${COMMANDS} commands keep every invariant`,
  async () => {
    let commands = 0
    // The notifications each shard held at the end of a run, summed: the runs did reach every shard.
    const perShard = shardDbs().map(() => 0)
    // What the runs with two transports reached: failover's paths taken, summed.
    const reached = { runs: 0, pauses: 0, circuits: 0, waits: 0, failedOver: 0, bothProviders: 0 }
    const runs = fc.oneof(
      fc.tuple(
        fc.constantFrom<ModelTransports>('resend', 'cloudflare'),
        fc.commands(commandArbitraries, { maxCommands: COMMANDS, size: 'max', ...REPLAY }),
      ),
      fc.tuple(
        fc.constantFrom<ModelTransports>(['resend', 'cloudflare'], ['cloudflare', 'resend']),
        fc.commands(failoverArbitraries, { maxCommands: COMMANDS, size: 'max', ...REPLAY }),
      ),
    )
    // The shard of each of the run's three persons: drawn by fast-check, not by their random user ids, so that a
    // seed and path replay a run with its persons where they were.
    const shards = fc.tuple(...[0, 1, 2].map(() => fc.nat(perShard.length - 1)))
    const property = fc.asyncProperty(
      runs,
      fc.constantFrom('2', '5'),
      shards,
      async ([transports, steps], circuit, placed) => {
        const world = new World(transports, { vars: { CIRCUIT_FAILURES: circuit }, shards: placed })
        try {
          await world.setup()
          await fc.asyncModelRun(() => ({ model: {}, real: world }), steps)
          commands += [...steps].length
          world.note('drain')
          await world.drain()
          for (const [shard, db] of shardDbs().entries()) {
            const row = await db.prepare('SELECT count(*) AS n FROM notifications').first<{ n: number }>()
            perShard[shard] = (perShard[shard] ?? 0) + (row?.n ?? 0)
          }
          if (world.failover) {
            reached.runs += 1
            reached.pauses += world.pausesSeen.length
            reached.circuits += world.pausesSeen.filter((pause) => pause.includes('circuit-open')).length
            reached.waits += world.waits.filter((wait) => wait.failover !== null).length
            reached.failedOver += world.resolutions.filter((end) => end.failover !== null).length
            const providers = Map.groupBy(world.emails(), (email) => email.notificationId)
            reached.bothProviders += [...providers.values()].filter(
              (emails) => new Set(emails.map((email) => email.transport)).size > 1,
            ).length
          }
          const violations = await settled(world)
          if (violations.length > 0) throw new ModelViolation(violations, world)
        } finally {
          world.close()
        }
      },
    )
    const result = await fc.check(property, {
      numRuns: RUNS,
      seed: SEED,
      ...(env.MODEL_PATH ? { path: env.MODEL_PATH } : {}),
      endOnFailure: env.MODEL_SHRINK === 'no',
    })
    console.log(
      `model: seed ${SEED}, ${perShard.length} database(s) (notifications in each: ${perShard.join('/')}), ${result.numRuns} runs, ${commands} commands, ${result.failed ? 'FAILED' : 'passed'}; with two transports: ${reached.runs} runs, ${reached.pauses} pauses begun (${reached.circuits} circuits opened), ${reached.waits} failover waits, ${reached.failedOver} ended with no event, ${reached.bothProviders} notifications emailed through both`,
    )
    const report = result.failed
      ? `${fc.defaultReportMessage(result)}\n${(result.errorInstance as Error | undefined)?.message ?? ''}`
      : 'passed'
    expect(report).toBe('passed')
  },
  Number(env.MODEL_TIMEOUT_MS),
)
