import type { Executor } from 'flushwave'
import { graph } from './data.js'
import { mixedTable } from './schema.js'
import { flushwaveUnitsOfWork, schemaOf, type Library } from './series/flushwave.js'
import type { UnitOfWork } from './series/types.js'

/**
 * The bench's Flushwave units of work on an executor that answers at once: Flushwave's own client
 * work with the server, the driver and the network taken out (own-cpu.ts, ab-own.ts).
 */

let nextId = 1n
/** Answers at once: ids counted up, every read a row per id asked for, every write one row per statement. */
const executor: Executor = {
  read: async (statement) => {
    // mixedFlush's finds ask `id = any($1::int8[])` and select id, name, value, updated_at.
    const ids = String(statement.params[0]).replace(/[{}"]/g, '').split(',')
    return ids.map((id) => [id, 'loaded', 0, '2026-01-01T00:00:00Z'])
  },
  write: async (waves) => ({ rowCounts: waves.map((wave) => wave.map(() => 1)), returned: new Map(), roundTrips: 1, coldStatements: 0 }),
  nextIds: async (requests) => ({
    ids: requests.map((r) => {
      const first = nextId
      nextId += BigInt(r.count)
      return { first, count: r.count, step: 1 }
    }),
    roundTrips: 1,
  }),
  transaction: async (work) => work(executor),
  warmUp: async () => ({ connections: 1, prepared: 0, durationMs: 0 }),
}

/**
 * Prepares one unit of work of `scenario` (bulkCreate or mixedFlush) on `lib` per call, untimed
 * (mixedFlush's finds among it), and returns its timed part. `key` makes each call's rows its own.
 */
export function instantUnits(lib: Library, scenario: string, size: number): (key: number) => Promise<UnitOfWork> {
  const orm = lib.flushwave({ schema: schemaOf(lib), executor })
  const series = flushwaveUnitsOfWork(() => orm.em() as never, async () => {})
  if (scenario === 'bulkCreate') return (key) => series.bulkCreate(graph(size, `own${key}`))
  if (scenario !== 'mixedFlush') throw new Error(`Flushwave's own work is measured on bulkCreate or mixedFlush, not ${scenario}`)
  const tables = Array.from({ length: size }, (_, i) => mixedTable(i + 1))
  return (key) => {
    const first = (i: number) => 2 * (key * tables.length + i) + 1
    return series.mixedFlush({
      tables,
      updateIds: tables.map((_, i) => first(i)),
      deleteIds: tables.map((_, i) => first(i) + 1),
      insertName: `own${key}`,
      updateValue: 42,
    })
  }
}
