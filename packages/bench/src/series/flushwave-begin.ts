import { PostgresJsExecutor, type Executor } from 'flushwave'
import type postgres from 'postgres'
import { flushwaveSeries, writesOnly } from './flushwave.js'

/**
 * The same plan, sent the way Joist and most pipelining code do: inside `sql.begin`, each wave as
 * a `Promise.all`. postgres.js awaits BEGIN before the callback and COMMIT after it: 3 round trips.
 */
function beginExecutor(sql: postgres.Sql): Executor {
  const base = new PostgresJsExecutor(sql)
  return {
    read: (statement) => base.read(statement),
    nextIds: (requests) => base.nextIds(requests),
    transaction: (fn) => base.transaction(fn),
    warmUp: (statements) => base.warmUp(statements),
    async write(waves) {
      const rowCounts: number[][] = []
      await sql.begin(async (tx) => {
        for (const wave of waves) {
          const results = await Promise.all(
            wave.map((s) => tx.unsafe(s.text, s.params.map((p) => tx.typed(p as never, 25)) as never[], { prepare: true })),
          )
          rowCounts.push(results.map((r) => r.count))
        }
      })
      return { rowCounts, roundTrips: 2 + waves.length, coldStatements: 0 }
    },
  }
}

export const series = writesOnly(flushwaveSeries('flushwave-begin', beginExecutor))
