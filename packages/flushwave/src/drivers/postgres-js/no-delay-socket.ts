import { once } from 'node:events'
import net from 'node:net'
import { guardStalledWrites } from './stalled-write-guard.js'

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
 * peer's delayed-ACK timer, up to 40 ms), as seen on the wire (docs/design-notes.md, "Nagle's algorithm
 * and postgres.js"). node-postgres sets TCP_NODELAY itself.
 *
 * Hosts are tried in order, as postgres.js does; TLS still works (postgres.js wraps the socket).
 * It also bounds how long an ended connection may linger (see closeWithin), and frees a connection
 * postgres.js 3.4.9 left unable to send (see guardStalledWrites).
 */
export async function noDelaySocket(target: SocketTarget): Promise<net.Socket> {
  const targets = target.path ? [{ path: target.path }] : target.host.map((host, i) => ({ host, port: target.port[i] ?? target.port[0] ?? 5432 }))
  for (const [i, t] of targets.entries()) {
    const socket = 'path' in t ? net.connect(t.path) : net.connect(t.port, t.host)
    socket.setNoDelay(true)
    closeWithin(socket, END_GRACE_MS)
    // The last host's socket is returned still connecting: if it fails, postgres.js sees the error
    // and the close, and reconnects later. A factory that throws instead leaves postgres.js 3.4.9
    // with a connection stuck in its connecting state for good (seen after a server restart).
    if (i === targets.length - 1) return guarded(socket)
    try {
      await once(socket, 'connect')
      return guarded(socket)
    } catch {
      socket.destroy()
    }
  }
  throw new Error('noDelaySocket: no host to connect to')
}

function guarded(socket: net.Socket): net.Socket {
  guardStalledWrites(socket)
  return socket
}

/** How long a peer gets to close a connection postgres.js ended before the socket is destroyed. */
const END_GRACE_MS = 1_000

/**
 * postgres.js ends a connection politely (Terminate, then FIN) and keeps it until the peer closes
 * its side. Across a dead network that takes as long as TCP retransmissions do, minutes, and a
 * connection Flushwave cut after a flush timeout would stay out of the pool all that time. So an
 * ended socket that is still open after `graceMs` is destroyed.
 */
function closeWithin(socket: net.Socket, graceMs: number): void {
  const end = socket.end.bind(socket) as (...args: unknown[]) => net.Socket
  socket.end = ((...args: unknown[]) => {
    setTimeout(() => socket.destroyed || socket.destroy(), graceMs).unref()
    return end(...args)
  }) as typeof socket.end
}

/**
 * postgres.js options that set `socket: noDelaySocket` (its `socket` hook is not in its type
 * definitions): `postgres(url, { ...tcpNoDelay, max: 10 })`.
 */
export const tcpNoDelay: Record<never, never> = Object.freeze({ socket: noDelaySocket })
