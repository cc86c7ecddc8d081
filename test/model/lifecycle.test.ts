import { env } from 'cloudflare:workers'
import fc from 'fast-check'
import { expect, it } from 'vitest'
import { shardDbs } from '../shards.ts'
import { commandArbitraries, ModelViolation } from './commands.ts'
import { settled } from './invariants.ts'
import { type ModelTransport, World } from './world.ts'

/**
 * The lifecycle model: random runs of commands — events of every kind, queue
 * deliveries in any order and again, the provider's faults, D1 failing
 * between two steps, the cron, the clock, an operator's replay, discard,
 * erasure and cancellation (also while a send is in flight), a person's look
 * at their feed — against the real Worker, with the invariants checked after
 * every command and once more when the run's faults are healed and it has
 * run on.
 * `npm test` runs MODEL_RUNS (100) runs of up to MODEL_COMMANDS (30)
 * commands; `npm run model -- --runs N` runs more. A failure prints its seed
 * and path (replay: `npm run model -- --seed S --path P`) and the shrunk
 * command list, which becomes a named test (./sequences.test.ts).
 */
const RUNS = Number(env.MODEL_RUNS)
const COMMANDS = Number(env.MODEL_COMMANDS)
const SEED = env.MODEL_SEED === '' ? Date.now() ^ (Math.random() * 0x100000000) : Number(env.MODEL_SEED)

it(
  `the lifecycle model: ${RUNS} runs of up to ${COMMANDS} commands keep every invariant`,
  async () => {
    let commands = 0
    // The notifications each shard held at the end of a run, summed: the runs did reach every shard.
    const perShard = shardDbs().map(() => 0)
    const property = fc.asyncProperty(
      fc.constantFrom<ModelTransport>('resend', 'cloudflare'),
      fc.commands(commandArbitraries, { maxCommands: COMMANDS, size: 'max' }),
      async (transport, steps) => {
        const world = new World(transport)
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
      `model: seed ${SEED}, ${perShard.length} database(s) (notifications in each: ${perShard.join('/')}), ${result.numRuns} runs, ${commands} commands, ${result.failed ? 'FAILED' : 'passed'}`,
    )
    const report = result.failed
      ? `${fc.defaultReportMessage(result)}\n${(result.errorInstance as Error | undefined)?.message ?? ''}`
      : 'passed'
    expect(report).toBe('passed')
  },
  Number(env.MODEL_TIMEOUT_MS),
)
