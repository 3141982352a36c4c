import { once } from 'node:events'
import net from 'node:net'
import postgres from 'postgres'
import { describe, expect, inject, it } from 'vitest'
import { noDelaySocket, tcpNoDelay } from '../../src/index.js'

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
})
