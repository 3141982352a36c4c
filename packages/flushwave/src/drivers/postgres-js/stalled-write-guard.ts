import type net from 'node:net'

/**
 * Frees a postgres.js connection that can no longer send (postgres 3.4.9).
 *
 * postgres.js holds a write under 1 KiB back for one `setImmediate`. When a socket closes while such
 * a write waits (many backends ended at once: one connection's close sends a query on another whose
 * close is already due), its close handler cancels the timer but leaves it set, and keeps the bytes.
 * From then on `write()` never schedules again: the connection's next startup message joins the
 * stale bytes and waits for 1 KiB to pile up, while the server waits for the startup. Its queries
 * and reservations then wait for `connect_timeout` (30 s by default) and the pool is a connection
 * short all that time.
 *
 * postgres.js starts a session by listening for data and writing its startup (or SSL) request at
 * once, so a socket with a data listener and still no write two event-loop turns later belongs to
 * such a connection. It is destroyed: postgres.js reconnects and appends another startup, until the
 * pile passes 1 KiB and goes out in one write. That write is stale bytes and startups, not the single
 * packet a session begins with, so it is dropped and the socket destroyed; the connection, its buffer
 * empty at last, then starts cleanly. About a dozen quick local reconnects instead of 30 s.
 */
export function guardStalledWrites(socket: net.Socket): void {
  let written = false
  const write = socket.write as (chunk: unknown, ...rest: unknown[]) => boolean
  const firstWrite = function (this: net.Socket, chunk: unknown, ...rest: unknown[]): boolean {
    if (written) return write.call(this, chunk, ...rest) // only when wrapped again after us
    written = true
    // Later writes go straight to net.Socket's own, unless someone wrapped this one since.
    if (socket.write === firstWrite) delete (socket as { write?: unknown }).write
    if (Buffer.isBuffer(chunk) && !isSessionStart(chunk)) {
      socket.destroy()
      return true
    }
    return write.call(this, chunk, ...rest)
  } as typeof socket.write
  socket.write = firstWrite
  const onListener = (event: string | symbol): void => {
    if (event !== 'data') return
    socket.off('newListener', onListener)
    // postgres.js's own held-back write runs in the first turn; ours looks after it.
    setImmediate(() => setImmediate(() => written || socket.destroyed || socket.destroy()))
  }
  socket.on('newListener', onListener)
}

const PROTOCOL_3 = 3
const SSL_REQUEST = 80877103
const CANCEL_REQUEST = 80877102
const GSSENC_REQUEST = 80877104

/** Whether `bytes` is exactly one packet a session opens with: a startup, SSL, GSS or cancel request. */
export function isSessionStart(bytes: Buffer): boolean {
  if (bytes.length < 8 || bytes.readInt32BE(0) !== bytes.length) return false
  const code = bytes.readInt32BE(4)
  return code >>> 16 === PROTOCOL_3 || code === SSL_REQUEST || code === CANCEL_REQUEST || code === GSSENC_REQUEST
}
