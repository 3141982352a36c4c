import { randomBytes } from 'node:crypto'
import type { Latency, Proxy, Toxic } from 'toxiproxy-node-client'
import { freePort } from './free-port.js'
import type { Database } from './postgres.js'
import type { ToxiproxyServer } from './toxiproxy.js'

/** A toxiproxy proxy in front of a database, with a latency knob. */
export interface LatencyProxy {
  /** The database URL, through the proxy. */
  url: string
  host: string
  port: number
  proxy: Proxy
  /** Delays every server→client chunk by ms (± jitterMs); replaces the previous setting, 0 removes it. */
  setLatency(ms: number, jitterMs?: number): Promise<void>
  /** Adds a toxic (reset_peer, timeout, slicer, bandwidth, limit_data, latency…); resolves to its removal. */
  addToxic(spec: ToxicSpec): Promise<() => Promise<void>>
  /** Disables the proxy (existing connections are closed, new ones refused) or enables it again. */
  setEnabled(enabled: boolean): Promise<void>
  /** Deletes the proxy, closing its connections. */
  remove(): Promise<void>
}

/** A toxic as toxiproxy's API takes it; `stream` is the direction it acts on. */
export interface ToxicSpec {
  type: 'latency' | 'bandwidth' | 'slow_close' | 'timeout' | 'reset_peer' | 'slicer' | 'limit_data'
  stream: 'upstream' | 'downstream'
  attributes: Record<string, number>
  /** Share of connections it applies to, 0 to 1 (default 1). */
  toxicity?: number
}

export interface ProxyDatabaseOptions {
  /** Prefix of the proxy's name; a unique suffix is always added. */
  name?: string
  /** host:port of the database as toxiproxy reaches it. Default: TOXIPROXY_UPSTREAM, else db.host:db.port. */
  upstream?: string
  /** Port the proxy listens on. Default: a free one, which is right only when toxiproxy runs on this host. */
  port?: number
}

// Downstream: the server's replies wait, so each awaited statement costs one full delay.
const TOXIC = 'devdb_latency'

/**
 * Puts a new proxy in front of `db`. For a toxiproxy in docker compose, set TOXIPROXY_UPSTREAM
 * (postgres:5432: the database as the container sees it) and TOXIPROXY_LISTEN_HOST=0.0.0.0 (so the
 * published port reaches the proxy); clients then connect to the host of TOXIPROXY_URL.
 */
export async function proxyDatabase(
  toxi: ToxiproxyServer,
  db: Database,
  opts: ProxyDatabaseOptions = {},
): Promise<LatencyProxy> {
  const name = `${opts.name ?? 'postgres'}-${process.pid}-${randomBytes(4).toString('hex')}`
  const listenHost = process.env.TOXIPROXY_LISTEN_HOST || '127.0.0.1'
  const port = opts.port ?? (await freePort())
  const upstream = opts.upstream ?? (process.env.TOXIPROXY_UPSTREAM || hostPort(db.host, db.port))
  const proxy = await toxi.client.createProxy({ name, listen: hostPort(listenHost, port), upstream })

  // A wildcard listen address is not something to connect to: use the host the API answers on.
  const host = ['0.0.0.0', '::', ''].includes(listenHost) ? new URL(toxi.apiUrl).hostname.replace(/^\[(.*)\]$/, '$1') : listenHost
  const url = new URL(db.url)
  url.hostname = host.includes(':') ? `[${host}]` : host
  url.port = String(port)

  let toxic: Toxic<Latency> | undefined
  return {
    url: url.toString(),
    host,
    port,
    proxy,
    async setLatency(ms, jitterMs = 0) {
      if (!(ms >= 0 && jitterMs >= 0)) throw new RangeError(`devdb: latency must be ≥ 0 ms, got ${ms} ± ${jitterMs}`)
      // toxiproxy takes whole milliseconds.
      const attributes: Latency = { latency: Math.round(ms), jitter: Math.round(jitterMs) }
      const body = { name: TOXIC, type: 'latency' as const, stream: 'downstream' as const, toxicity: 1, attributes }
      if (attributes.latency === 0) {
        await toxic?.remove()
        toxic = undefined
      } else {
        toxic = toxic ? await toxic.update(body) : await proxy.addToxic(body)
      }
    },
    async addToxic(spec) {
      const name = `devdb_${spec.type}_${spec.stream}_${randomBytes(3).toString('hex')}`
      const toxic = await proxy.addToxic({ name, toxicity: 1, ...spec } as never)
      return async () => {
        await (toxic as Toxic<unknown>).remove()
      }
    },
    async setEnabled(enabled) {
      await proxy.update({ listen: proxy.listen, upstream: proxy.upstream, enabled })
    },
    async remove() {
      await proxy.remove()
      toxic = undefined
    },
  }
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`
}
