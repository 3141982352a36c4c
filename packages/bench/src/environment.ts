import { proxyDatabase, startDatabase, startToxiproxy, type LatencyProxy } from 'devdb'
import type postgres from 'postgres'
import { benchDatabase, via } from './database.js'
import { pgbouncerBinary, startPgBouncer, type Pooler } from './pooler.js'
import { WireCounter } from './wire.js'

/**
 * What every series connects through: client → wire counter → toxiproxy (latency on every
 * server→client chunk) → [PgBouncer, with --pooler] → PostgreSQL. The pooler sits behind the latency
 * so that a series pays the latency once per round trip, as an application next to its pooler and
 * far from nothing else would not; and the counter sees exactly what the client sends.
 */
export interface Environment {
  /** The database URL for series. */
  readonly url: string
  /** The same database straight, with no counter or proxy between (em.stream's memory). */
  readonly directUrl: string
  /**
   * Through the latency proxy but not the wire counter (throughput, which counts nothing): the
   * counter relays every byte through two more sockets of the bench's own process, work that no
   * application's process does and that would take its share of the client's CPU.
   */
  readonly latencyUrl: string
  readonly admin: postgres.Sql
  readonly wire: WireCounter
  readonly proxy: LatencyProxy
  readonly postgres: string
  readonly pooler: string | undefined
  close(): Promise<void>
}

export async function startEnvironment(options: { pooler: boolean; poolerSize: number }): Promise<Environment> {
  const bin = options.pooler ? pgbouncerBinary() : undefined
  if (options.pooler && !bin) throw new Error('--pooler: pgbouncer is not on PATH (apt-get install pgbouncer); run without --pooler')
  const db = await startDatabase()
  const toxi = await startToxiproxy()
  const bench = await benchDatabase(db.url)
  const pooler: Pooler | undefined = bin ? await startPgBouncer(bin, db, options.poolerSize) : undefined
  const proxy = await proxyDatabase(toxi, db, { name: 'bench', ...(pooler ? { upstream: `${pooler.host}:${pooler.port}` } : {}) })
  const wire = await WireCounter.start({ host: proxy.host, port: proxy.port })
  const [{ version }] = (await bench.admin`select current_setting('server_version') as version`) as unknown as [{ version: string }]
  return {
    url: via(bench.url, '127.0.0.1', wire.port),
    directUrl: bench.url,
    latencyUrl: via(bench.url, proxy.host, proxy.port),
    admin: bench.admin,
    wire,
    proxy,
    postgres: `${version}${db.external ? '' : ' (embedded)'}`,
    pooler: pooler && `${pooler.version}, transaction mode`,
    async close() {
      await proxy.setLatency(0).catch(() => undefined)
      await wire.close()
      await proxy.remove()
      await pooler?.stop()
      await bench.drop()
      await toxi.stop()
      await db.stop()
    },
  }
}
