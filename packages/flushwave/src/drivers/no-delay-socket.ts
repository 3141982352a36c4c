import { once } from 'node:events'
import net from 'node:net'

/** The part of postgres.js's options its `socket` hook receives that says where to connect. */
export interface SocketTarget {
  readonly host: readonly string[]
  readonly port: readonly number[]
  readonly path?: string | false
}

/**
 * A postgres.js `socket` option that turns Nagle's algorithm off: `postgres(url, { socket: noDelaySocket })`.
 *
 * postgres.js leaves Nagle on and writes a pipeline in pieces (it flushes its buffer every 1 KiB). With
 * Nagle, the second piece waits until the first is acknowledged, and the server side delays that ACK
 * until it has something to send back: a flush larger than 1 KiB then waits one more round trip (or the
 * peer's delayed-ACK timer, up to 40 ms). Measured through a 5 ms proxy: the second piece left 6.6 ms
 * after the first, right after the first reply. node-postgres sets TCP_NODELAY itself.
 *
 * Hosts are tried in order, as postgres.js does; TLS still works (postgres.js wraps the socket).
 */
export async function noDelaySocket(target: SocketTarget): Promise<net.Socket> {
  let last: unknown
  const targets = target.path ? [{ path: target.path }] : target.host.map((host, i) => ({ host, port: target.port[i] ?? target.port[0] ?? 5432 }))
  for (const t of targets) {
    const socket = 'path' in t ? net.connect(t.path) : net.connect(t.port, t.host)
    socket.setNoDelay(true)
    try {
      await once(socket, 'connect')
      return socket
    } catch (error) {
      last = error
      socket.destroy()
    }
  }
  throw last ?? new Error('noDelaySocket: no host to connect to')
}

/**
 * postgres.js options that set `socket: noDelaySocket` (its `socket` hook is not in its type
 * definitions): `postgres(url, { ...tcpNoDelay, max: 10 })`.
 */
export const tcpNoDelay: Record<never, never> = Object.freeze({ socket: noDelaySocket })
