/**
 * `npm run model -- --runs N [--commands C] [--seed S] [--path P --replay-path R] [--no-shrink] [--databases 1|2]`:
 * the lifecycle model (test/model/lifecycle.test.ts) for longer than `npm
 * test` runs it (100 runs of up to 30 commands), inside workerd like every
 * Worker test: with one D1 database and then with two shards (DB_SHARDS=2),
 * or with the one `--databases` names. It prints the seed, the runs and the commands it ran; a
 * failure prints the seed and path that replay it and the shrunk command
 * list, whose `replayPath` comment is the commands' own path: replay with
 * `--seed S --path P --replay-path R --databases D`, D the project that failed. Exits non-zero when an invariant broke.
 */
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

const ROOT = join(import.meta.dirname, '..')
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '1000' },
    commands: { type: 'string', default: '30' },
    seed: { type: 'string' },
    path: { type: 'string' },
    'replay-path': { type: 'string' },
    'no-shrink': { type: 'boolean', default: false },
    databases: { type: 'string' },
  },
})
const seed = values.seed ?? String(Math.floor(Math.random() * 2 ** 31))
const runs = Number(values.runs)
// About 0.2 s a run here, with room: a run's drain may move the clock a day and more.
const timeoutMs = Math.max(900_000, runs * 2_000)
process.stdout.write(`[model] ${runs} runs of up to ${values.commands} commands, seed ${seed}\n`)
const started = Date.now()
const PROJECTS: Record<string, string> = { '1': 'worker', '2': 'two databases' }
if (values.databases !== undefined && !(values.databases in PROJECTS)) {
  process.stderr.write(`[model] --databases is 1 or 2, not ${values.databases}\n`)
  process.exit(2)
}
const project = values.databases === undefined ? [] : ['--project', PROJECTS[values.databases] as string]
const result = spawnSync('npx', ['vitest', 'run', ...project, 'test/model/lifecycle.test.ts'], {
  cwd: ROOT,
  stdio: 'inherit',
  env: {
    ...process.env,
    MODEL_RUNS: String(runs),
    MODEL_COMMANDS: values.commands,
    MODEL_SEED: seed,
    MODEL_PATH: values.path ?? '',
    MODEL_REPLAY_PATH: values['replay-path'] ?? '',
    MODEL_SHRINK: values['no-shrink'] ? 'no' : 'yes',
    MODEL_TIMEOUT_MS: String(timeoutMs),
  },
})
// The test writes its summary to the captured console (test/log-privacy.ts), one line per project run.
const summaries = readFileSync(join(ROOT, '.wrangler', 'test-console.log'), 'utf8')
  .split('\n')
  .filter((line) => line.startsWith(`model: seed ${seed},`))
for (const summary of summaries) process.stdout.write(`[model] ${summary}\n`)
if (summaries.length === 0) process.stdout.write('[model] no summary (the run did not finish)\n')
process.stdout.write(`[model] ${Math.round((Date.now() - started) / 1000)} s\n`)
process.exit(result.status ?? 1)
