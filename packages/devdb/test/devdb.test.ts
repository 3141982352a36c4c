import { createServer } from 'node:net'
import postgres from 'postgres'
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import {
  createTestSchema,
  freePort,
  proxyDatabase,
  searchPathOptions,
  startDatabase,
  startToxiproxy,
  type Database,
  type ToxiproxyServer,
} from '../src/index.js'

/** The shared servers from the global setup, taken through the DATABASE_URL / TOXIPROXY_URL path. */
async function shared(): Promise<{ db: Database; toxi: ToxiproxyServer }> {
  vi.stubEnv('DATABASE_URL', inject('databaseUrl'))
  vi.stubEnv('TOXIPROXY_URL', inject('toxiproxyUrl'))
  try {
    return { db: await startDatabase(), toxi: await startToxiproxy() }
  } finally {
    vi.unstubAllEnvs()
  }
}

async function timed(run: () => PromiseLike<unknown>): Promise<number> {
  const start = performance.now()
  await run()
  return performance.now() - start
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

let db: Database
let toxi: ToxiproxyServer
const clients: postgres.Sql[] = []
function connect(url: string, options: postgres.Options<Record<string, postgres.PostgresType>> = {}): postgres.Sql {
  const sql = postgres(url, { max: 1, onnotice: () => {}, ...options })
  clients.push(sql)
  return sql
}

beforeAll(async () => {
  ;({ db, toxi } = await shared())
})
afterAll(async () => {
  await Promise.all(clients.map((sql) => sql.end()))
})
afterEach(() => {
  vi.unstubAllEnvs()
})

describe('shared database', () => {
  it('is the one the global setup provided, also in process.env of test workers', () => {
    expect(process.env.DATABASE_URL).toBe(inject('databaseUrl'))
    expect(process.env.TOXIPROXY_URL).toBe(inject('toxiproxyUrl'))
    expect(db.external).toBe(true)
    expect(db.url).toBe(inject('databaseUrl'))
    expect(toxi.external).toBe(true)
    expect(toxi.apiUrl).toBe(inject('toxiproxyUrl'))
  })

  it('answers select 1 and reports its version', async () => {
    const sql = connect(db.url)
    expect(await sql`select 1 as one`).toEqual([{ one: 1 }])
    const [{ server_version }] = await sql<[{ server_version: string }]>`show server_version`
    expect(server_version).toMatch(/^\d+\.\d+/)
  })
})

describe('proxyDatabase', () => {
  it('adds and removes latency on the server→client stream', async () => {
    const latency = await proxyDatabase(toxi, db)
    try {
      expect(latency.url).toContain(`@127.0.0.1:${latency.port}/`)
      const sql = postgres(latency.url, { max: 1, onnotice: () => {} })
      try {
        await sql`select 1` // connect before timing
        await latency.setLatency(100)
        expect(await timed(() => sql`select 1`)).toBeGreaterThanOrEqual(100)
        await latency.setLatency(150, 10) // replaces the toxic, does not add a second one
        const toxics = (await (await fetch(`${toxi.apiUrl}/proxies/${latency.proxy.name}/toxics`)).json()) as unknown[]
        expect(toxics).toHaveLength(1)
        expect(toxics[0]).toMatchObject({ type: 'latency', stream: 'downstream', attributes: { latency: 150, jitter: 10 } })
        await latency.setLatency(0)
        expect(await timed(() => sql`select 1`)).toBeLessThan(100)
      } finally {
        await sql.end()
      }
    } finally {
      await latency.remove()
    }
    await expect(toxi.client.get(latency.proxy.name)).rejects.toThrow(/404/)
  })
})

describe('createTestSchema', () => {
  it('isolates tables by search_path', async () => {
    const a = await createTestSchema(db.url, 'Devdb A') // mixed case and a space: quoted everywhere
    const b = await createTestSchema(db.url)
    try {
      expect(a.name).not.toBe(b.name)
      const inA = connect(db.url, searchPathOptions(a.name))
      const inB = connect(db.url, searchPathOptions(b.name))
      await inA`create table widget (id int primary key)`
      await inA`insert into widget values (1)`
      expect(await inA`select id from widget`).toEqual([{ id: 1 }])
      expect(await inB`select to_regclass('widget') as found`).toEqual([{ found: null }])
      await expect(inB`select id from widget`).rejects.toMatchObject({ code: '42P01' })
    } finally {
      await a.drop()
      await b.drop()
    }
    const sql = connect(db.url)
    const left = await sql`select nspname from pg_namespace where nspname in (${a.name}, ${b.name})`
    expect(left).toHaveLength(0)
  })
})

describe('embedded servers', () => {
  it('starts PostgreSQL 18, hands its log to onLog, and frees its port on stop()', async () => {
    vi.stubEnv('DATABASE_URL', '')
    const port = await freePort()
    let log = ''
    const own = await startDatabase({ port, onLog: (text) => (log += text) })
    try {
      expect(own).toMatchObject({ external: false, host: '127.0.0.1', port })
      const sql = postgres(own.url, { max: 1, onnotice: () => {} })
      try {
        const [{ server_version }] = await sql<[{ server_version: string }]>`show server_version`
        expect(server_version).toMatch(/^18\./)
        const [{ address }] = await sql<[{ address: string }]>`select current_setting('listen_addresses') as address`
        expect(address).toBe('127.0.0.1')
        await sql`do $$ begin raise log 'devdb onLog check'; end $$`
        // The server writes its log asynchronously: give the line a moment to arrive.
        for (let i = 0; i < 100 && !log.includes('devdb onLog check'); i++) await new Promise((resolve) => setTimeout(resolve, 50))
        expect(log).toContain('LOG:  devdb onLog check')
      } finally {
        await sql.end()
      }
    } finally {
      await own.stop()
    }
    expect(await canListen(port)).toBe(true)
  }, 60_000)

  it('starts a local toxiproxy and frees its port on stop()', async () => {
    vi.stubEnv('TOXIPROXY_URL', '')
    const own = await startToxiproxy()
    const port = Number(new URL(own.apiUrl).port)
    try {
      expect(own.external).toBe(false)
      expect(new URL(own.apiUrl).hostname).toBe('127.0.0.1')
      expect(await own.client.getVersion()).toMatch(/\S/)
    } finally {
      await own.stop()
    }
    expect(await canListen(port)).toBe(true)
  })
})
