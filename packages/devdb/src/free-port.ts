import { createServer } from 'node:net'

/**
 * Asks the kernel for an unused TCP port on 127.0.0.1. The port is released before it is returned,
 * so start the server on it right away: another process could still take it in between.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('devdb: could not get a free port on 127.0.0.1'))))
    })
  })
}
