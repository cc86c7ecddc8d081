declare namespace Cloudflare {
  interface Env {
    TEST_MIGRATIONS: import('cloudflare:test').D1Migration[]
    MODEL_RUNS: string
    MODEL_COMMANDS: string
    MODEL_SEED: string
    MODEL_PATH: string
    MODEL_REPLAY_PATH: string
    MODEL_SHRINK: string
    MODEL_TIMEOUT_MS: string
  }
  interface GlobalProps {
    mainModule: typeof import('../src/index.ts')
  }
}
