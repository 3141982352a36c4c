import knexFactory from 'knex'
import { flushwave } from 'flushwave'
import { benchSchema, flushwaveUnitsOfWork } from './flushwave.js'
import type { SeriesFactory } from './types.js'

/** The same pipeline on a connection of a knex pool (its `pg` client), as an application on knex runs it. */
export const series: SeriesFactory = {
  name: 'flushwave-knex',
  async open(url) {
    const knex = knexFactory({ client: 'pg', connection: url, pool: { min: 1, max: 1 } })
    await knex.raw('select 1') // connect now, not in the first timed unit of work
    const orm = flushwave({ schema: benchSchema, knex })
    return flushwaveUnitsOfWork(() => orm.em(), () => knex.destroy())
  },
}
