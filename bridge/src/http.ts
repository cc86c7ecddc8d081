import { createServer, type Server } from 'node:http'
import type { Metrics } from './metrics.ts'

/** What /readyz looks at. */
export type Readiness = { sources: { name: string; up: boolean }[]; sinkHealthy: boolean; sinkUrl: string }

async function sinkReachable(sinkUrl: string): Promise<boolean> {
  try {
    const response = await fetch(new URL('/healthz', sinkUrl), { signal: AbortSignal.timeout(2000) })
    return response.ok
  } catch {
    return false
  }
}

/** `/healthz` (alive), `/readyz` (enabled sources connected, sink reachable and accepting), `/metrics`. */
export function startHttp(port: number, metrics: Metrics, readiness: () => Readiness): Promise<Server> {
  const server = createServer(async (request, response) => {
    const send = (status: number, body: string, type = 'application/json') => {
      response.writeHead(status, { 'content-type': type })
      response.end(body)
    }
    if (request.url === '/healthz') return send(200, JSON.stringify({ status: 'ok' }))
    if (request.url === '/readyz') {
      const state = readiness()
      const reachable = await sinkReachable(state.sinkUrl)
      const ready = state.sources.every((source) => source.up) && state.sinkHealthy && reachable
      return send(
        ready ? 200 : 503,
        JSON.stringify({ ready, sources: state.sources, sink: { reachable, healthy: state.sinkHealthy } }),
      )
    }
    if (request.url === '/metrics') return send(200, await metrics.registry.metrics(), metrics.registry.contentType)
    send(404, JSON.stringify({ error: { code: 'NOT_FOUND', message: 'no such route' } }))
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '0.0.0.0', () => resolve(server))
  })
}
