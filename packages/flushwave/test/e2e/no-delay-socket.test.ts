import { once } from 'node:events'
import net from 'node:net'
import postgres from 'postgres'
import { describe, expect, inject, it } from 'vitest'
import { noDelaySocket, tcpNoDelay, type SocketTarget } from '../../src/index.js'

type Factory = (target: SocketTarget) => Promise<net.Socket>
const plainSocket: Factory = async (target) => net.connect(target.port[0] ?? 5432, target.host[0])

/**
 * Two postgres.js instances of one connection each; both sockets are destroyed together, and the
 * first close sends a query on the other connection, whose close is already due: the situation of
 * many backends ended at once. Answers how long the other connection's next query took, or its error.
 */
async function queryAfterCloseRace(factory: Factory, connectTimeout: number): Promise<{ ms: number; error?: string }> {
  const url = inject('databaseUrl')
  const open = () => {
    const sockets: net.Socket[] = []
    const socket = async (target: SocketTarget) => {
      const s = await factory(target)
      sockets.push(s)
      return s
    }
    return { sql: postgres(url, { socket, max: 1, connect_timeout: connectTimeout } as postgres.Options<{}>), sockets }
  }
  const a = open()
  const b = open()
  try {
    await a.sql`select 1`
    await b.sql`select 1`
    let victim: typeof a | undefined
    let late: Promise<unknown> | undefined
    for (const [me, other] of [[a, b], [b, a]] as const) {
      me.sockets[0]!.once('close', () => {
        if (victim !== undefined) return
        victim = other
        late = other.sql`select 'late'`.execute().catch(() => undefined)
      })
    }
    a.sockets[0]!.destroy()
    b.sockets[0]!.destroy()
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(victim).toBeDefined()
    await late
    const started = performance.now()
    try {
      expect(await victim!.sql`select 2 as two`).toEqual([{ two: 2 }])
      return { ms: performance.now() - started }
    } catch (error) {
      return { ms: performance.now() - started, error: (error as Error).message }
    }
  } finally {
    await a.sql.end({ timeout: 1 })
    await b.sql.end({ timeout: 1 })
  }
}

describe('noDelaySocket', () => {
  it('connects with Nagle off, trying hosts in order', async () => {
    const url = new URL(inject('databaseUrl'))
    const closed = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, '127.0.0.1', () => {
        const port = (server.address() as net.AddressInfo).port
        server.close(() => resolve(port))
      })
    })
    const socket = await noDelaySocket({ host: ['127.0.0.1', url.hostname], port: [closed, Number(url.port)] })
    // The last host's socket comes back still connecting, so that postgres.js sees its failure.
    await once(socket, 'connect')
    expect(socket.remotePort).toBe(Number(url.port))
    socket.destroy()
    const refused = await noDelaySocket({ host: ['127.0.0.1'], port: [closed] })
    await expect(once(refused, 'connect')).rejects.toThrow(/ECONNREFUSED/)
  })

  it('lets postgres.js reconnect once a refused server is back', async () => {
    // A factory that throws on a refused connect left postgres.js 3.4.9 with a connection stuck
    // connecting for good; the socket's own error and close let it retry.
    const url = new URL(inject('databaseUrl'))
    const relay = net.createServer((client) => {
      const upstream = net.connect(Number(url.port), url.hostname)
      client.pipe(upstream).pipe(client)
      client.on('error', () => upstream.destroy())
      upstream.on('error', () => client.destroy())
    })
    const port = await new Promise<number>((resolve) => relay.listen(0, '127.0.0.1', () => resolve((relay.address() as net.AddressInfo).port)))
    await new Promise((resolve) => relay.close(resolve)) // refused from now on
    const through = new URL(url)
    through.port = String(port)
    const sql = postgres(through.toString(), { ...tcpNoDelay, max: 1, connect_timeout: 2, backoff: () => 0.05 })
    try {
      await expect(sql`select 1`).rejects.toThrow(/ECONNREFUSED/)
      await new Promise<void>((resolve) => relay.listen(port, '127.0.0.1', resolve))
      expect(await sql`select 1 as one`).toEqual([{ one: 1 }])
    } finally {
      await sql.end({ timeout: 1 })
      relay.close()
    }
  })

  it('works as postgres.js options', async () => {
    const sql = postgres(inject('databaseUrl'), { ...tcpNoDelay, max: 1 })
    try {
      expect(await sql`select 1 as one`).toEqual([{ one: 1 }])
    } finally {
      await sql.end()
    }
  })

  it('frees a connection whose socket closed while a small write waited (postgres.js 3.4.9)', async () => {
    // postgres.js cancels the held-back write but keeps its timer set: with a plain socket the
    // connection's next startup is never sent, and the query waits for connect_timeout.
    const plain = await queryAfterCloseRace(plainSocket, 2)
    expect(plain.error).toMatch(/CONNECT_TIMEOUT/)
    // The guard notices a session that never starts and cycles the socket until the stuck bytes go.
    const guarded = await queryAfterCloseRace(noDelaySocket, 30)
    expect(guarded.error).toBeUndefined()
    expect(guarded.ms).toBeLessThan(5_000)
  })
})
