/**
 * replicas: reads spread over two streaming replicas against the primary alone, on a real cluster
 * (scripts/patroni-cluster.sh: three PostgreSQL 15 nodes, synchronous replication):
 *
 *   scripts/patroni-cluster.sh pnpm bench --scenario replicas
 *
 * Two Flushwave instances on postgres.js, side by side in one run: `primary` reads from the leader
 * (a pool of POOL), `replicas` has the same primary pool and a pool of POOL on each replica. Rounds
 * alternate between them, so that both meet the same machine.
 *
 * - Throughput: CLIENTS clients, each reading one page after another (a fresh EntityManager per
 *   read, no consistency token: any replica may answer) for ROUND_MS a round, ROUNDS rounds each.
 *   The page filters on a column without an index, so that the servers do real work.
 * - Round trips: PAIRS flush-then-read pairs through relays that count what crossed the wire
 *   (wire.ts): the read follows the EntityManager's own flush, so on a replica it carries the
 *   replay check in its pipeline, and goes to the primary if the replica has not replayed the flush.
 */
import { createTablesSql, defineSchema, entity, flushwave, t, tcpNoDelay, type Flushwave } from 'flushwave'
import os from 'node:os'
import postgres from 'postgres'
import { median, quantile, sortedCopy } from './stats.js'
import { WireCounter } from './wire.js'

const schema = defineSchema({
  ReplicaItem: entity('bench_replica_item', { id: t.id(), tag: t.text(), n: t.integer() }),
})
type Orm = Flushwave<typeof schema.defs>

const ROWS = 20_000
const CLIENTS = 16
const POOL = 10
const ROUNDS = 3
const ROUND_MS = 5_000
const PAIRS = 300

export interface ReplicaReadsResult {
  readonly nodes: { readonly primary: string; readonly replicas: readonly string[] }
  readonly clients: number
  readonly pool: number
  readonly rows: number
  /** Per setup: reads per second of each round, the median, p50 latency (ms) over all rounds, errors. */
  readonly throughput: Record<Setup, { readonly rounds: readonly number[]; readonly readsPerSecond: number; readonly p50Ms: number; readonly errors: number }>
  /** Per setup: flush-then-read pairs, round trips per pair, reads the replicas answered. */
  readonly pairs: Record<Setup, { readonly pairs: number; readonly roundTripsPerPair: number; readonly readsOnReplicas: number; readonly fallbacks: number }>
}

type Setup = 'primary' | 'replicas'

/** Runs the scenario on the nodes of CLUSTER_NODE_URLS; undefined (and a line saying how) without them. */
export async function measureReplicaReads(log: (line: string) => void): Promise<ReplicaReadsResult | undefined> {
  const urls = process.env.CLUSTER_NODE_URLS?.split(',').filter(Boolean)
  if (!urls || urls.length < 3) {
    log('replicas: skipped, it needs a cluster: scripts/patroni-cluster.sh pnpm bench --scenario replicas')
    return undefined
  }
  const { primary, replicas } = await roles(urls)
  log(`replicas: primary ${hostPort(primary)}, replicas ${replicas.map(hostPort).join(', ')}; ${CLIENTS} clients, pools of ${POOL}`)
  const admin = postgres(primary, { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe('drop table if exists bench_replica_item')
    for (const statement of createTablesSql(schema)) await admin.unsafe(statement)
    await admin.unsafe(`insert into bench_replica_item (tag, n) select md5(i::text), i from generate_series(1, ${ROWS}) as i`)
    await admin.unsafe('analyze bench_replica_item')
    await replayed(admin, replicas)
    const throughput = await measureThroughput(primary, replicas, log)
    const pairs = await measurePairs(primary, replicas, log)
    return { nodes: { primary: hostPort(primary), replicas: replicas.map(hostPort) }, clients: CLIENTS, pool: POOL, rows: ROWS, throughput, pairs }
  } finally {
    await admin.unsafe('drop table if exists bench_replica_item').catch(() => undefined)
    await admin.end({ timeout: 1 })
  }
}

/** Which node leads and which replay (pg_is_in_recovery on each). */
async function roles(urls: readonly string[]): Promise<{ primary: string; replicas: string[] }> {
  const recovering = await Promise.all(
    urls.map(async (url) => {
      const sql = postgres(url, { max: 1, onnotice: () => {} })
      try {
        return (await sql`select pg_is_in_recovery() as r`)[0]!.r as boolean
      } finally {
        await sql.end({ timeout: 1 })
      }
    }),
  )
  const primary = urls.filter((_, i) => !recovering[i])
  if (primary.length !== 1) throw new Error(`replicas: expected one primary among ${urls.length} nodes, found ${primary.length}`)
  return { primary: primary[0]!, replicas: urls.filter((_, i) => recovering[i]) }
}

/** Waits until every replica has replayed the primary's current WAL position. */
async function replayed(admin: postgres.Sql, replicas: readonly string[]): Promise<void> {
  const [{ lsn }] = (await admin`select pg_current_wal_lsn()::text as lsn`) as unknown as [{ lsn: string }]
  for (const url of replicas) {
    const sql = postgres(url, { max: 1, onnotice: () => {} })
    try {
      for (let i = 0; !(await sql`select pg_last_wal_replay_lsn() >= ${lsn}::pg_lsn as ok`)[0]!.ok; i++) {
        if (i === 200) throw new Error(`replicas: ${hostPort(url)} did not replay ${lsn} within 10 s`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    } finally {
      await sql.end({ timeout: 1 })
    }
  }
}

/** A Flushwave on `primary`, with `replicas` when given; `close` ends every pool. */
function open(primary: string, replicas: readonly string[]): { orm: Orm; close(): Promise<void> } {
  const pool = (url: string) => postgres(url, { ...tcpNoDelay, max: POOL, onnotice: () => {} })
  const sql = pool(primary)
  const replicaPools = replicas.map(pool)
  const orm = flushwave({ schema, sql, replicas: replicaPools })
  return { orm, close: async () => void (await Promise.all([sql, ...replicaPools].map((p) => p.end({ timeout: 1 })))) }
}

/** A page a list endpoint might read: a filter no index serves, ordered, 20 rows. */
const page = (orm: Orm, k: number) => orm.em().find('ReplicaItem', { tag: { like: `%${(k % 16).toString(16)}${((k >> 4) % 16).toString(16)}%` } }, { orderBy: { id: 'asc' }, limit: 20 })

async function measureThroughput(primary: string, replicas: readonly string[], log: (line: string) => void): Promise<ReplicaReadsResult['throughput']> {
  const setups: Record<Setup, ReturnType<typeof open>> = { primary: open(primary, []), replicas: open(primary, replicas) }
  const rounds: Record<Setup, number[]> = { primary: [], replicas: [] }
  const latencies: Record<Setup, number[]> = { primary: [], replicas: [] }
  const errors: Record<Setup, number> = { primary: 0, replicas: 0 }
  try {
    for (const setup of Object.keys(setups) as Setup[]) for (let k = 0; k < 64; k++) await page(setups[setup].orm, k) // connections open, shapes known
    for (let round = 0; round < ROUNDS; round++) {
      for (const setup of round % 2 === 0 ? (['primary', 'replicas'] as const) : (['replicas', 'primary'] as const)) {
        const { orm } = setups[setup]
        let reads = 0
        const started = performance.now()
        const deadline = started + ROUND_MS
        const client = async (c: number) => {
          for (let k = c; performance.now() < deadline; k += CLIENTS) {
            const t0 = performance.now()
            try {
              await page(orm, k)
              reads++
              latencies[setup].push(performance.now() - t0)
            } catch {
              errors[setup]++
            }
          }
        }
        await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)))
        const perSecond = reads / ((performance.now() - started) / 1000)
        rounds[setup].push(perSecond)
        log(`  round ${round + 1} ${setup}: ${perSecond.toFixed(0)} reads/s`)
      }
    }
  } finally {
    for (const s of Object.values(setups)) await s.close()
  }
  const row = (setup: Setup) => ({ rounds: rounds[setup], readsPerSecond: median(rounds[setup]), p50Ms: quantile(sortedCopy(latencies[setup]), 0.5), errors: errors[setup] })
  return { primary: row('primary'), replicas: row('replicas') }
}

async function measurePairs(primary: string, replicas: readonly string[], log: (line: string) => void): Promise<ReplicaReadsResult['pairs']> {
  const result = {} as Record<Setup, ReplicaReadsResult['pairs'][Setup]>
  /** Round trips to the primary beyond one a flush and one a read (id blocks), from the primary-only setup. */
  let extra = 0
  for (const setup of ['primary', 'replicas'] as const) {
    const relays = await Promise.all([primary, ...(setup === 'replicas' ? replicas : [])].map((url) => WireCounter.start(target(url))))
    const [toPrimary, ...toReplicas] = relays as [WireCounter, ...WireCounter[]]
    const { orm, close } = open(through(primary, toPrimary), toReplicas.map((relay, i) => through(replicas[i]!, relay)))
    try {
      // Warm: connections open and statement shapes known, so that what is counted is steady state.
      for (let i = 0; i < 20; i++) await pair(orm, i)
      for (const relay of relays) relay.reset()
      for (let i = 0; i < PAIRS; i++) await pair(orm, i)
      const roundTrips = relays.reduce((n, r) => n + r.roundTrips, 0)
      // A read on a replica is its replay check and the page, in one pipeline; one that falls back
      // to the primary is one statement more there.
      const replicaReads = toReplicas.reduce((n, r) => n + r.roundTrips, 0)
      if (setup === 'primary') extra = roundTrips - 2 * PAIRS
      const fallbacks = setup === 'replicas' ? Math.max(0, toPrimary.roundTrips - PAIRS - extra) : 0
      result[setup] = { pairs: PAIRS, roundTripsPerPair: roundTrips / PAIRS, readsOnReplicas: replicaReads, fallbacks }
      log(`  ${setup}: ${PAIRS} flush-then-read pairs, ${(roundTrips / PAIRS).toFixed(2)} round trips a pair; reads on replicas ${replicaReads}, on the primary after a replica had not replayed ${fallbacks}`)
    } finally {
      await close()
      for (const relay of relays) await relay.close()
    }
  }
  return result
}

/** A unit of work that inserts a row, then, on the same EntityManager, reads a page. */
async function pair(orm: Orm, i: number): Promise<void> {
  const em = orm.em()
  em.create('ReplicaItem', { tag: `pair-${i}`, n: -i })
  await em.flush()
  await em.find('ReplicaItem', { n: { lte: 0 } }, { orderBy: { id: 'desc' }, limit: 20 })
}

const hostPort = (url: string) => new URL(url).host
const target = (url: string) => ({ host: new URL(url).hostname, port: Number(new URL(url).port) })
function through(url: string, relay: WireCounter): string {
  const u = new URL(url)
  u.hostname = '127.0.0.1'
  u.port = String(relay.port)
  return u.toString()
}

/** The markdown section the scenario writes (results/latest-replicas.md). */
export function replicaReadsMarkdown(r: ReplicaReadsResult): string {
  const t = r.throughput
  const p = r.pairs
  return [
    `## replicas: reads over two replicas against the primary alone`,
    '',
    `Primary ${r.nodes.primary}, replicas ${r.nodes.replicas.join(', ')} (Patroni, synchronous replication); ${r.clients} clients, a pool of ${r.pool} per node, ${r.rows.toLocaleString('en')} rows; postgres.js.`,
    `The client and the three servers share this machine's ${os.cpus().length} cores: spreading reads over more servers cannot add capacity here,`,
    'so the throughput ratio shows what routing costs; on separate hosts the replicas add their own.',
    '',
    'Throughput: each client reads a page (a filter no index serves, 20 rows) with a fresh EntityManager, one after another; rounds alternate between the setups.',
    '',
    '| setup | reads/s (median of rounds) | rounds | p50 ms | errors |',
    '|---|---:|---|---:|---:|',
    ...(['primary', 'replicas'] as const).map((s) => `| ${s} | ${t[s].readsPerSecond.toFixed(0)} | ${t[s].rounds.map((x) => x.toFixed(0)).join(', ')} | ${t[s].p50Ms.toFixed(2)} | ${t[s].errors} |`),
    '',
    `replicas ÷ primary: ${(t.replicas.readsPerSecond / t.primary.readsPerSecond).toFixed(2)}×`,
    '',
    'Round trips: each pair flushes one row and reads a page on the same EntityManager, counted on the wire. On a replica the read carries',
    "the check that the replica replayed the flush in its own pipeline; a replica that had not yet replayed it sends the read to the primary.",
    '',
    '| setup | flush-then-read pairs | round trips a pair | reads on replicas | fallbacks to the primary |',
    '|---|---:|---:|---:|---:|',
    ...(['primary', 'replicas'] as const).map((s) => `| ${s} | ${p[s].pairs} | ${p[s].roundTripsPerPair.toFixed(2)} | ${p[s].readsOnReplicas} | ${p[s].fallbacks} |`),
    '',
  ].join('\n')
}
