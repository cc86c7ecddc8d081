import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { InboundEvent } from '@notify-edge/contracts'

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
