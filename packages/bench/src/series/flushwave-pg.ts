import { flushwave } from 'flushwave'
import pg from 'pg'
import { benchSchema, flushwaveUnitsOfWork } from './flushwave.js'
import type { SeriesFactory } from './types.js'

/**
 * The same pipeline through node-postgres: the application's `pg.Pool`, made as most are (without
 * `pipeline: true`; Flushwave turns pipelining on for the flush's client). Unnamed statements, so
 * the server parses each statement of every flush, as behind a transaction pooler.
 */
export const series: SeriesFactory = {
  name: 'flushwave-pg',
  pooler: true,
  async open(url, options = {}) {
    const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 1 })
    pool.on('error', () => undefined)
    await pool.query('select 1') // connect now, not in the first timed unit of work
    const orm = flushwave({ schema: benchSchema, pg: pool })
    return flushwaveUnitsOfWork(() => orm.em(), () => pool.end())
  },
}
