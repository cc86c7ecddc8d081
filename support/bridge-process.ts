import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { watchOutput } from './child-output.ts'
import { freePort, waitFor } from './wait.ts'

/** The bridge as a child process (`node bridge/src/main.ts`), as it runs in its container. */
export async function startBridge(env: Record<string, string>) {
  const port = await freePort()
  const child: ChildProcess = spawn(process.execPath, ['bridge/src/main.ts'], {
    // Only what the test gives: the bridge must not pick up this shell's variables.
    env: {
      PATH: process.env.PATH,
      HTTP_PORT: String(port),
      LOG_LEVEL: 'info',
      SINK_TOKEN: 'test-ingest-token',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout?.on('data', (chunk) => {
    output += chunk
  })
  child.stderr?.on('data', (chunk) => {
    output += chunk
  })
  watchOutput(`bridge ${port}`, () => output)
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as string | null,
  }))
  return {
    child,
    port,
    exited,
    output: () => output,
    async metrics(): Promise<string> {
      return (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
    },
    async ready(): Promise<void> {
      await waitFor(
        async () => ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok ? true : undefined),
        'the bridge to listen',
      )
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      return exited
    },
    kill() {
      child.kill('SIGKILL')
      return exited
    },
  }
}
