import { startDatabase } from 'devdb'
import type postgres from 'postgres'
import { benchDatabase } from './database.js'
import { scenario, type Scenario, type ScenarioName } from './scenarios.js'
import { loadSeries } from './series/index.js'
import type { Series } from './series/types.js'

export interface SideBySide {
  readonly scenario: Scenario
  readonly rounds: number
  /** The series' names, in the order of `opened`. */
  readonly names: readonly string[]
  readonly opened: readonly Series[]
  readonly admin: postgres.Sql
  close(): Promise<void>
}

/**
 * What the scripts that run series side by side on the embedded server start from (client-cpu.ts,
 * timeline.ts): `scenario size rounds series,…` from the command line, each with a default, and
 * those series opened on a fresh benchmark database.
 */
export async function sideBySide(defaults: { scenario: ScenarioName; size: number; rounds: number; series: string }): Promise<SideBySide> {
  const [name = defaults.scenario, size = String(defaults.size), rounds = String(defaults.rounds), series = defaults.series] = process.argv.slice(2)
  const db = await startDatabase()
  const bench = await benchDatabase(db.url)
  const names = series.split(',')
  const opened = await Promise.all(names.map(async (n) => (await loadSeries(n)).open(bench.url)))
  return {
    scenario: scenario(name as ScenarioName, Number(size)),
    rounds: Number(rounds),
    names,
    opened,
    admin: bench.admin,
    async close() {
      for (const s of opened) await s.close()
      await bench.drop()
      await db.stop()
    },
  }
}
