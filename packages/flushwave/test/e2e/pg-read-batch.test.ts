import knexFactory from 'knex'
import pg from 'pg'
import { afterEach, describe, expect, inject, it } from 'vitest'
import type { PgClient, PgPoolClient } from '../../src/drivers/node-postgres/pg-client.js'
import { batchedReads, MAX_BATCH } from '../../src/drivers/node-postgres/pg-read-batch.js'

/**
 * Reads through a node-postgres pool: made together, they share one connection (and its one round
 * trip, pipelined); a failing read fails alone. Real server, real pg.Pool.
 */
const pools: { end(): Promise<void> }[] = []
afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.end()
})

function pool(max: number): pg.Pool {
  const p = new pg.Pool({ connectionString: inject('databaseUrl'), max })
  p.on('error', () => undefined)
  pools.push(p)
  return p
}

function readsOn(p: pg.Pool) {
  return batchedReads(
    () => p.connect(),
    (client, broken) => (client as PgPoolClient).release(broken || undefined),
  )
}

const pid = { text: 'select pg_backend_pid() as pid, $1::int4 as n', rowMode: 'array' as const }

describe('batchedReads on a pg.Pool', () => {
  it('sends reads made together on one connection, each answered with its own rows', async () => {
    const p = pool(5)
    const query = readsOn(p)
    const results = await Promise.all([1, 2, 3, 4, 5].map((n) => query({ ...pid, values: [n] })))
    expect(results.map((r) => (r.rows[0] as unknown[])[1])).toEqual([1, 2, 3, 4, 5])
    expect(new Set(results.map((r) => (r.rows[0] as unknown[])[0])).size).toBe(1)
    // One connection opened for five reads; without batching the pool opened five.
    expect(p.totalCount).toBe(1)
    expect(p.idleCount).toBe(1)
  })

  it('a read whose query fails fails alone, and the connection goes back to the pool', async () => {
    const p = pool(2)
    const query = readsOn(p)
    const [before, bad, after] = await Promise.allSettled([query({ ...pid, values: [1] }), query({ text: 'select 1 / $1::int4', values: [0] }), query({ ...pid, values: [3] })])
    expect(before.status).toBe('fulfilled')
    expect(bad).toMatchObject({ status: 'rejected', reason: { code: '22012' } })
    expect(after).toMatchObject({ status: 'fulfilled', value: { rows: [[expect.anything(), 3]] } })
    expect(p.totalCount).toBe(1)
    expect(p.idleCount).toBe(1)
    // The connection is still good, and back in its usual mode.
    const client = await p.connect()
    expect((client as unknown as PgClient).pipeline).toBe(false)
    expect((await client.query('select 2 as two')).rows).toEqual([{ two: 2 }])
    client.release()
  })

  it('reads made while every connection is busy wait together and go out as one batch', async () => {
    const p = pool(1)
    const query = readsOn(p)
    const held = await p.connect()
    let sent = 0
    // Count the batches: each one switches a client to pipeline mode once.
    const counting = batchedReads(
      async () => {
        const client = await p.connect()
        sent++
        return client
      },
      (client, broken) => (client as PgPoolClient).release(broken || undefined),
    )
    const waiting = Promise.all([1, 2, 3].map((n) => counting({ ...pid, values: [n] })))
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(sent).toBe(0)
    held.release()
    const results = await waiting
    expect(results.map((r) => (r.rows[0] as unknown[])[1])).toEqual([1, 2, 3])
    expect(sent).toBe(1)
    expect((await query({ ...pid, values: [4] })).rows[0]).toEqual([expect.anything(), 4])
  })

  it(`splits more than ${MAX_BATCH} reads made together into batches of at most ${MAX_BATCH}`, async () => {
    const p = pool(3)
    let batches = 0
    const query = batchedReads(
      async () => {
        batches++
        return p.connect()
      },
      (client, broken) => (client as PgPoolClient).release(broken || undefined),
    )
    const results = await Promise.all(Array.from({ length: 2 * MAX_BATCH + 1 }, (_, n) => query({ ...pid, values: [n] })))
    expect(results.map((r) => (r.rows[0] as unknown[])[1])).toEqual(Array.from({ length: 2 * MAX_BATCH + 1 }, (_, n) => n))
    expect(batches).toBe(3)
  })

  it('a read on a connection that dies fails with the connection error, and the connection is not reused', async () => {
    const p = pool(1)
    const query = readsOn(p)
    const victim = (await query({ ...pid, values: [1] })).rows[0] as unknown[]
    const killer = new pg.Client({ connectionString: inject('databaseUrl') })
    await killer.connect()
    try {
      const reads = Promise.allSettled([query({ text: 'select pg_sleep(5)' }), query({ ...pid, values: [2] })])
      await new Promise((resolve) => setTimeout(resolve, 100))
      await killer.query('select pg_terminate_backend($1)', [victim[0]])
      const [slept, next] = await reads
      expect(slept.status).toBe('rejected')
      expect(next.status).toBe('rejected')
    } finally {
      await killer.end()
    }
    // A fresh connection answers the next read.
    const fresh = (await query({ ...pid, values: [3] })).rows[0] as unknown[]
    expect(fresh[1]).toBe(3)
    expect(fresh[0]).not.toBe(victim[0])
  })
})

describe('batchedReads on knex', () => {
  it('sends reads made together on one of its connections', async () => {
    const knex = knexFactory({ client: 'pg', connection: inject('databaseUrl'), pool: { min: 0, max: 5 } })
    pools.push({ end: () => knex.destroy() })
    const client = knex.client as { acquireConnection(): Promise<PgClient>; releaseConnection(c: PgClient): unknown; pool: { numUsed(): number; numFree(): number } }
    const query = batchedReads(
      () => client.acquireConnection(),
      (c) => void client.releaseConnection(c),
    )
    const results = await Promise.all([1, 2, 3, 4, 5].map((n) => query({ ...pid, values: [n] })))
    expect(results.map((r) => (r.rows[0] as unknown[])[1])).toEqual([1, 2, 3, 4, 5])
    expect(new Set(results.map((r) => (r.rows[0] as unknown[])[0])).size).toBe(1)
    expect(client.pool.numUsed() + client.pool.numFree()).toBe(1)
  })
})
