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
    expect(socket.remotePort).toBe(Number(url.port))
    socket.destroy()
    await expect(noDelaySocket({ host: ['127.0.0.1'], port: [closed] })).rejects.toThrow(/ECONNREFUSED/)
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
