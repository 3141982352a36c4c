import net from 'node:net'

/**
 * A TCP relay that reads the PostgreSQL frontend protocol on its way to the server and counts, for
 * every series alike, what actually crossed the wire: statements (Execute and simple Query
 * messages) and round trips (each time the client sends after the server has answered).
 */
export class WireCounter {
  statements = 0
  roundTrips = 0
  private readonly server: net.Server
  private readonly sockets = new Set<net.Socket>()

  private constructor(
    readonly port: number,
    server: net.Server,
  ) {
    this.server = server
  }

  static async start(target: { host: string; port: number }): Promise<WireCounter> {
    let counter: WireCounter | undefined
    const server = net.createServer((client) => counter!.relay(client, target))
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
    counter = new WireCounter((server.address() as net.AddressInfo).port, server)
    return counter
  }

  /** Counts since the last reset. */
  reset(): void {
    this.statements = 0
    this.roundTrips = 0
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private relay(client: net.Socket, target: { host: string; port: number }): void {
    const upstream = net.connect(target.port, target.host)
    client.setNoDelay(true)
    upstream.setNoDelay(true)
    this.sockets.add(client).add(upstream)
    let started = false
    let pending = Buffer.alloc(0)
    let answered = true
    client.on('data', (chunk: Buffer) => {
      if (process.env.WIRE_DEBUG) console.error(`${performance.now().toFixed(2)} C→S ${chunk.length} ${[...chunk.subarray(0, 1)].map((b) => String.fromCharCode(b))}`)
      if (answered) this.roundTrips++
      answered = false
      pending = Buffer.concat([pending, chunk])
      // The startup message has no type byte; every later message is type + int32 length.
      while (true) {
        if (!started) {
          if (pending.length < 4) break
          const length = pending.readInt32BE(0)
          if (pending.length < length) break
          pending = pending.subarray(length)
          started = true
          continue
        }
        if (pending.length < 5) break
        const length = pending.readInt32BE(1)
        if (pending.length < 1 + length) break
        const type = String.fromCharCode(pending[0]!)
        if (type === 'E' || type === 'Q') this.statements++
        pending = pending.subarray(1 + length)
      }
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      if (process.env.WIRE_DEBUG) console.error(`${performance.now().toFixed(2)} S→C ${chunk.length}`)
      answered = true
      client.write(chunk)
    })
    const end = () => {
      client.destroy()
      upstream.destroy()
      this.sockets.delete(client)
      this.sockets.delete(upstream)
    }
    client.on('close', end).on('error', end)
    upstream.on('close', end).on('error', end)
  }
}
