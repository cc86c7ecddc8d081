/**
 * A TCP relay between a browser and the local Worker whose network can be
 * dropped the way a phone's or a train's drops: connections already open go
 * silent (nothing passes, nothing closes them), and new ones fail. When the
 * network comes back the silent connections are reset, as their peers'
 * timeouts would end them; new ones pass again.
 */

import { type AddressInfo, createServer, Socket } from 'node:net'

/** A running relay. */
export type NetworkCut = {
  port: number
  url: string
  /** Drops the network: open connections go silent, new ones are refused. */
  drop: () => void
  /** Brings it back: the silent connections are reset. */
  restore: () => void
  stop: () => Promise<void>
}

/** Relays 127.0.0.1:<a free port> to 127.0.0.1:`targetPort`. */
export async function startNetworkCut(targetPort: number): Promise<NetworkCut> {
  let down = false
  const pairs = new Set<[Socket, Socket]>()
  const server = createServer((client) => {
    if (down) {
      client.resetAndDestroy()
      return
    }
    const upstream = new Socket()
    const pair: [Socket, Socket] = [client, upstream]
    pairs.add(pair)
    const end = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
    // Data passes only while the network is up; what arrives while it is down is lost, as on a dead link.
    client.on('data', (chunk) => {
      if (!down) upstream.write(chunk)
    })
    upstream.on('data', (chunk) => {
      if (!down) client.write(chunk)
    })
    upstream.connect(targetPort, '127.0.0.1')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    drop() {
      down = true
    },
    restore() {
      down = false
      for (const [client, upstream] of pairs) {
        client.resetAndDestroy()
        upstream.destroy()
      }
      pairs.clear()
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const [client, upstream] of pairs) {
          client.destroy()
          upstream.destroy()
        }
        server.close(() => resolve())
      }),
  }
}
