import type { LateQuery } from '../port.js'
import { destroyConnection, guardErrors, pipelined, type PgClient, type PgResult } from './pg-client.js'
import { isConnectionFailure } from '../protocol/reads.js'
import { lostName, StatementNames } from './named-statements.js'

type QueryConfig = { text: string; values?: unknown[]; rowMode?: 'array' }

interface Read {
  readonly config: QueryConfig
  readonly late: LateQuery | undefined
  resolve(result: PgResult): void
  reject(error: unknown): void
}

/**
 * Most reads one batch sends: as many as postgres.js pipelines on a connection by default. Every
 * read of a batch is answered once the last is in (they come back in the same round trip), so a
 * batch stays short.
 */
export const MAX_BATCH = 100

/**
 * Reads on node-postgres connections (pg.Pool, knex, a transaction's client). Reads that arrive
 * while a connection is being checked out for an earlier one join it and go out with it in
 * pipeline mode (each with its own Sync: outside a transaction a failing read fails alone): one
 * connection and one round trip for all, as postgres.js pipelines the queries of a busy pool. A
 * request's concurrent `em.find`s took a pooled connection each, one round trip apiece, and under
 * load node-postgres made a fraction of postgres.js's flushes per second (docs/design-notes.md,
 * "Reads batched on node-postgres"). The busier the pool, the longer a checkout takes and the more
 * reads share it. In a transaction, "checking out" is waiting for what it has in flight on its client.
 */
export function batchedReads(
  acquire: () => Promise<PgClient>,
  release: (client: PgClient, broken: boolean) => void,
  names: StatementNames = new StatementNames(),
  inTransaction = false,
): (config: QueryConfig, late?: LateQuery) => Promise<PgResult> {
  let open: Read[] | undefined
  const start = (batch: Read[]) => {
    acquire().then(
      (client) => {
        if (open === batch) open = undefined
        void send(client, batch, release, names, inTransaction)
      },
      (error: unknown) => {
        if (open === batch) open = undefined
        for (const read of batch) read.reject(error)
      },
    )
  }
  return (config, late) =>
    new Promise<PgResult>((resolve, reject) => {
      if (open === undefined || open.length >= MAX_BATCH) start((open = []))
      open.push({ config, late, resolve, reject })
    })
}

async function send(client: PgClient, batch: readonly Read[], release: (client: PgClient, broken: boolean) => void, names: StatementNames, inTransaction: boolean): Promise<void> {
  // The pool does not listen to a checked-out client: a connection ended mid-read emits 'error'.
  const unguard = guardErrors(client)
  // A late read ends its pooled connection (and the batch with it): a transaction's is not the reads' to end.
  if (!inTransaction) {
    const stop = () => destroyConnection(client)
    for (const read of batch) if (read.late !== undefined) read.late.stop = stop
  }
  let settled: PromiseSettledResult<PgResult>[]
  try {
    settled = (await pipelined(client, () => names.issue(client, batch.map((read) => read.config)))).settled
    // A read whose named statement the server did not have is read again unnamed (outside a
    // transaction: inside, the failure aborted it).
    if (!inTransaction && names.lost(client, settled)) {
      const lost = batch.flatMap((_, i) => (settled[i]!.status === 'rejected' && lostName((settled[i] as PromiseRejectedResult).reason) ? [i] : []))
      const again = await pipelined(client, () => names.unnamed(client, lost.map((i) => batch[i]!.config)))
      lost.forEach((at, i) => (settled[at] = again[i]!))
    }
  } catch (error) {
    // Only pipelined() itself throws (a node-postgres without pipeline mode): nothing was sent.
    unguard()
    release(client, false)
    for (const read of batch) read.reject(error)
    return
  }
  unguard()
  // Back in the pool (and out of pipeline mode) before anyone hears: what a caller does next, a
  // flush say, can have this connection at once.
  release(client, settled.some((s) => s.status === 'rejected' && isConnectionFailure(s.reason)))
  settled.forEach((s, i) => (s.status === 'fulfilled' ? batch[i]!.resolve(s.value) : batch[i]!.reject(s.reason)))
}
