import knexFactory from 'knex'
import { flushwave } from 'flushwave'
import { benchSchema, flushwaveUnitsOfWork } from './flushwave.js'
import type { SeriesFactory } from './types.js'

/**
 * The same pipeline on a connection of a knex pool (its `pg` client), as an application on knex runs
 * it: Flushwave takes the connection from knex and sends the whole flush as one pipeline.
 */
export const series: SeriesFactory = {
  name: 'flushwave-knex',
  pooler: true,
  async open(url, options = {}) {
    const size = options.poolSize ?? 1
    const knex = knexFactory({ client: 'pg', connection: url, pool: { min: 1, max: size } })
    await knex.raw('select 1') // connect now, not in the first timed unit of work
    const orm = flushwave({ schema: benchSchema, knex })
    return flushwaveUnitsOfWork(() => orm.em(), () => knex.destroy())
  },
}
