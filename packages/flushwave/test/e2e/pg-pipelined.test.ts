import pg from 'pg'
import { describe, expect, inject, it } from 'vitest'
import { pipelined, whenIdle, type PgClient } from '../../src/drivers/node-postgres/pg-client.js'

/**
 * Pipelined sections on one node-postgres client (a transaction's: its reads and its flushes) run
 * one at a time: a section that ended switches pipeline mode back, which must not happen while
 * another's queries are out.
 */
describe('pipelined', () => {
  it('runs sections on one client one after another, each in pipeline mode, and restores the mode after the last', async () => {
    const client = new pg.Client({ connectionString: inject('databaseUrl') })
    await client.connect()
    try {
      const c = client as unknown as PgClient
      const events: string[] = []
      const first = pipelined(c, async () => {
        events.push(`first starts, pipeline ${String(c.pipeline)}`)
        const rows = await Promise.all([client.query('select pg_sleep(0.1)'), client.query('select 1 as one')])
        events.push('first ends')
        return rows[1].rows
      })
      const second = pipelined(c, async () => {
        events.push(`second starts, pipeline ${String(c.pipeline)}`)
        const rows = await Promise.all([client.query('select 2 as two'), client.query('select 3 as three')])
        events.push('second ends')
        return rows.map((r) => r.rows[0])
      })
      let idle = false
      const idleAfter = whenIdle(c).then(() => (idle = true))
      expect(await first).toEqual([{ one: 1 }])
      expect(await second).toEqual([{ two: 2 }, { three: 3 }])
      await idleAfter
      expect(idle).toBe(true)
      expect(events).toEqual(['first starts, pipeline true', 'first ends', 'second starts, pipeline true', 'second ends'])
      expect(c.pipeline).toBe(false)
      expect((await client.query('select 4 as four')).rows).toEqual([{ four: 4 }])
    } finally {
      await client.end()
    }
  })

  it('a section that fails does not hold up the next', async () => {
    const client = new pg.Client({ connectionString: inject('databaseUrl') })
    await client.connect()
    try {
      const c = client as unknown as PgClient
      const failing = pipelined(c, () => client.query('select 1 / 0'))
      const next = pipelined(c, () => client.query('select 5 as five'))
      await expect(failing).rejects.toMatchObject({ code: '22012' })
      expect((await next).rows).toEqual([{ five: 5 }])
      expect(c.pipeline).toBe(false)
    } finally {
      await client.end()
    }
  })
})
