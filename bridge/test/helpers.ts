import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { InboundEvent } from '@notify-edge/contracts'
import postgres from 'postgres'
import { leaksIn } from '../../test/log-privacy.ts'
import { migratePostgres } from '../src/migrate.ts'

export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

const outputs: { name: string; read: () => string }[] = []

/** Registers what a child process (the bridge, wrangler, the CLI) prints, for `assertNoLeaks`. */
export function watchOutput(name: string, read: () => string): void {
  outputs.push({ name, read })
}

/** Every line a watched child process printed that holds an e-mail address, a display name or a rejection reason. */
export function leakedLines(): string[] {
  return outputs.flatMap(({ name, read }) => leaksIn(read()).map((leak) => `${name}: ${leak}`))
}

/**
 * Fails when anything a child process of this test file printed leaks
 * personal data — the same scan the Worker's own log lines get.
 */
export function assertNoLeaks(): void {
  const found = leakedLines()
  if (found.length > 0) {
    throw new Error(`${found.length} line(s) of child output leak personal data:\n${found.slice(0, 20).join('\n')}`)
  }
}

/** Waits until `check` returns something other than undefined (polling; no fixed sleeps in assertions). */
export async function waitFor<T>(
  check: () => Promise<T | undefined> | T | undefined,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  while (Date.now() < deadline) {
    try {
      const value = await check()
      if (value !== undefined) return value
    } catch (error) {
      last = error
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`)
}

/** A database of its own, with the outbox migration applied; `drop()` removes it. */
export async function freshDatabase() {
  const name = `notify_edge_bridge_${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} })
  await admin.unsafe(`CREATE DATABASE ${name}`)
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`)
  await migratePostgres(url)
  const sql = postgres(url, { max: 4, onnotice: () => {} })
  return {
    url,
    sql,
    async drop() {
      await sql.end({ timeout: 1 })
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.end({ timeout: 1 })
    },
  }
}

/** Writes outbox rows as a producer would: log row and data row in one transaction. */
export async function writeRows(sql: postgres.Sql, count: number, writers = 1): Promise<string[]> {
  const ids: string[] = []
  await Promise.all(
    Array.from({ length: writers }, async (_, writer) => {
      for (let index = writer; index < count; index += writers) {
        const id = crypto.randomUUID()
        ids.push(id)
        const body = Buffer.from(JSON.stringify({ envelope: { eventId: id, eventType: 'response.created' }, n: index }))
        await sql.begin(async (tx) => {
          await tx`INSERT INTO data_exchange.message_queue_log (message_id) VALUES (${id})`
          await tx`INSERT INTO data_exchange.message_queue_log_data (message_id, message_body) VALUES (${id}, ${body})`
        })
      }
    }),
  )
  return ids
}

export async function transferredCount(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<{ count: string }[]>`SELECT count(*) FROM data_exchange.message_queue_log WHERE transferred`
  return Number(row?.count)
}

type Mode = 'accept' | 'fail503' | 'stall'

/**
 * Stands in for the Worker's ingest route: records every event of every
 * accepted request. `fail503` answers 503; `stall` never answers.
 */
export async function recordingSink(port = 0) {
  const accepted: InboundEvent[] = []
  const requests: { status: number; count: number }[] = []
  const stalled: ServerResponse[] = []
  let mode: Mode = 'accept'
  const server: Server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    if (request.url === '/healthz') return response.end('{"status":"ok"}')
    const { events } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { events: InboundEvent[] }
    if (mode === 'stall') {
      requests.push({ status: 0, count: events.length })
      stalled.push(response)
      return
    }
    const status = mode === 'fail503' ? 503 : 202
    requests.push({ status, count: events.length })
    if (status === 202) accepted.push(...events)
    response.writeHead(status, { 'content-type': 'application/json' })
    response.end(
      status === 202 ? JSON.stringify({ accepted: events.length }) : '{"error":{"code":"QUEUE_UNAVAILABLE"}}',
    )
  })
  server.listen(port, '127.0.0.1')
  await once(server, 'listening')
  const actualPort = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${actualPort}/v1/ingest`,
    port: actualPort,
    accepted,
    requests,
    setMode(next: Mode) {
      mode = next
    },
    ids: () => accepted.map((event) => event.sourceMessageId),
    async close() {
      for (const response of stalled) response.destroy()
      server.closeAllConnections()
      server.close()
      await once(server, 'close').catch(() => {})
    },
  }
}

/** A free TCP port (nothing listens on it once this returns). */
export async function freePort(): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  server.close()
  await once(server, 'close')
  return port
}

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
