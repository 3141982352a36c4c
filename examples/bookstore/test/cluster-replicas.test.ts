import { execFileSync } from 'node:child_process'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startBookstore, type Bookstore } from '../src/server.js'

/**
 * The bookstore with read replicas on a real cluster (scripts/patroni-cluster.sh; skipped without
 * it): the primary through HAProxy, both standbys as replicas, one of them with WAL replay paused.
 * A user who created an author and sends the answer's Consistency-Token (or its cookie) back sees
 * the author on every next request, while the paused replica does not have it (checked there) and
 * the live one answers reads (its transaction count grows): the routing is real. A request without
 * the token is read wherever the round robin sends it, and may miss.
 */
const env = process.env
const ready = env.CLUSTER_PRIMARY_URL !== undefined
const PAIRS = Number(env.CLUSTER_RYW_PAIRS ?? 1000) >= 1000 ? 60 : 20
const LSN = /^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/

describe.skipIf(!ready).each(['postgres', 'pg', 'knex'] as const)('the bookstore on replicas of a real cluster, %s', (executor) => {
  const script = (...args: string[]) => execFileSync(env.CLUSTER_SCRIPT!, args, { encoding: 'utf8', timeout: 120_000 }).trim()
  const patronictl = (...args: string[]) => {
    const [command, ...rest] = env.CLUSTER_PATRONICTL!.split(' ')
    execFileSync(command!, [...rest, ...args], { encoding: 'utf8', timeout: 120_000 })
  }
  const searchPath = `bookstore_cluster_${executor}`
  let admin: postgres.Sql
  let paused: postgres.Sql | undefined
  let live: postgres.Sql | undefined
  let bookstore: Bookstore

  beforeAll(async () => {
    script('wait-healthy', '90')
    admin = postgres(env.CLUSTER_PRIMARY_URL!, { max: 1, onnotice: () => {} })
    await admin.unsafe(`drop schema if exists ${searchPath} cascade`)
    await admin.unsafe(`create schema ${searchPath}`)
    const leader = Number(script('leader'))
    const replicas = [1, 2, 3].filter((n) => n !== leader)
    bookstore = await startBookstore({
      databaseUrl: env.CLUSTER_PRIMARY_URL!,
      searchPath,
      port: 0,
      poolMax: 4,
      logLevel: 'error',
      executor,
      replicaUrls: replicas.map((n) => env.CLUSTER_NODE_URLS!.split(',')[n - 1]!),
    })
    // The migrated tables must be on both replicas before one stops replaying.
    const [{ lsn }] = (await admin`select pg_current_wal_lsn()::text as lsn`) as unknown as [{ lsn: string }]
    for (const n of replicas) {
      const node = postgres(env.CLUSTER_SUPERUSER_NODE_URLS!.split(',')[n - 1]!, { max: 1, onnotice: () => {} })
      for (let i = 0; (await node`select pg_last_wal_replay_lsn() >= ${lsn}::pg_lsn as caught`)[0]!.caught !== true; i++) {
        if (i === 500) throw new Error(`node ${n} did not replay the migrations`)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await node.end({ timeout: 1 })
    }
    patronictl('pause', '--wait') // or Patroni resumes the replay
    paused = postgres(env.CLUSTER_SUPERUSER_NODE_URLS!.split(',')[replicas[0]! - 1]!, { max: 1, onnotice: () => {} })
    live = postgres(env.CLUSTER_SUPERUSER_NODE_URLS!.split(',')[replicas[1]! - 1]!, { max: 1, onnotice: () => {} })
    await paused`select pg_wal_replay_pause()`
  })
  afterAll(async () => {
    if (paused) await paused`select pg_wal_replay_resume()`.catch(() => undefined)
    await paused?.end({ timeout: 1 })
    await live?.end({ timeout: 1 })
    if (ready) patronictl('resume', '--wait')
    await bookstore?.close()
    await admin?.unsafe(`drop schema if exists ${searchPath} cascade`).catch(() => undefined)
    await admin?.end({ timeout: 1 })
  })

  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${bookstore.url}${path}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> }
  }

  it(`${PAIRS} writes, each read back with its token (header or cookie): all seen, the paused replica had none, the live one served reads`, { timeout: 120_000 }, async () => {
    const commits = async () => Number((await live!`select xact_commit::int8 as n from pg_stat_database where datname = current_database()`)[0]!.n)
    const liveBefore = await commits()
    let unseenWithout = 0
    for (let i = 0; i < PAIRS; i++) {
      const created = await call('POST', '/authors', { name: `Replica reader ${executor} ${i}` })
      expect(created.status).toBe(201)
      const token = created.headers.get('consistency-token')
      expect(token).toMatch(LSN)
      expect(created.headers.get('set-cookie')).toContain(`fw_seen=${encodeURIComponent(token!)}`)
      const id = created.body.id as number
      const [there] = await paused!.unsafe(`select count(*)::int as n from ${searchPath}.author where id = $1`, [id])
      expect(there!.n, 'the paused replica is behind').toBe(0)
      const viaHeader = await call('GET', `/authors/${id}`, undefined, { 'consistency-token': token! })
      expect(viaHeader.status, `author ${id} read with its token`).toBe(200)
      expect(viaHeader.headers.get('consistency-token'), 'a read passes the token on').toBe(token)
      const viaCookie = await call('GET', `/authors/${id}`, undefined, { cookie: `fw_seen=${encodeURIComponent(token!)}` })
      expect(viaCookie.status, `author ${id} read with its cookie`).toBe(200)
      const without = await call('GET', `/authors/${id}`)
      expect([200, 404]).toContain(without.status)
      if (without.status === 404) unseenWithout++
    }
    // Reads went to the replicas: the live one answered at least half of those sent without a token.
    // Its backends report their counts at most once a second, and an idle one after 10 s: polled.
    let liveReads = 0
    for (let i = 0; i < 60 && (liveReads = (await commits()) - liveBefore) < PAIRS / 2; i++) await new Promise((resolve) => setTimeout(resolve, 250))
    expect(liveReads).toBeGreaterThanOrEqual(PAIRS / 2)
    console.log(
      `bookstore on replicas (${executor}): ${PAIRS} writes, ${PAIRS * 2} reads with a token all saw their write (the paused replica had none of them); ` +
        `the live replica committed ${liveReads} read transactions; ${unseenWithout} of ${PAIRS} reads without a token missed`,
    )
    const bad = await call('GET', '/authors/1', undefined, { 'consistency-token': 'yesterday' })
    expect(bad.status).toBe(400)
    expect(bad.body.error).toBe('invalid consistency token')
  })
})
