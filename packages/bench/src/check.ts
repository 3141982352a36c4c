/**
 * Runs every scenario once for one series, straight to the database, and verifies what it wrote:
 *   pnpm --filter bench exec tsx src/check.ts <series> [scenario…]
 * For developing a series; `pnpm bench` runs the same verification before it times anything.
 */
import { startDatabase } from 'devdb'
import { benchDatabase } from './database.js'
import { scenario, type ScenarioName } from './scenarios.js'
import { loadSeries } from './series/index.js'

const [name, ...only] = process.argv.slice(2)
if (!name) throw new Error('usage: check.ts <series> [scenario…]')
const cases: [ScenarioName, number][] = [
  ['bulkCreate', 1],
  ['bulkCreate', 10],
  ['bulkUpdate', 10],
  ['mixedFlush', 1],
  ['mixedFlush', 20],
  ['deleteGraph', 1],
  ['cpuFlush', 10_000],
  ['noopFlush', 10_000],
  ['listEndpoint', 0],
  ['typesScale', 1_000],
]
const db = await startDatabase()
const bench = await benchDatabase(db.url)
const factory = await loadSeries(name)
const series = await factory.open(bench.url)
let failed = 0
try {
  for (const [scenarioName, size] of cases) {
    if (only.length > 0 && !only.includes(scenarioName)) continue
    if (scenarioName === 'listEndpoint' && !series.listEndpoint) continue
    if (scenarioName === 'typesScale' && !series.typesScale) continue
    const sc = scenario(scenarioName, size)
    for (let round = 1; round <= 2; round++) {
      try {
        const prepared = await sc.prepare(bench.admin, series, `c${round}`)
        const started = performance.now()
        await prepared.run()
        const ms = performance.now() - started
        await prepared.verify(bench.admin)
        console.log(`ok   ${name} ${scenarioName}×${size} round ${round}: ${ms.toFixed(1)} ms`)
      } catch (error) {
        failed++
        console.log(`FAIL ${name} ${scenarioName}×${size} round ${round}: ${(error as Error).stack}`)
      }
    }
  }
} finally {
  await series.close()
  await bench.drop()
  await db.stop()
}
process.exitCode = failed > 0 ? 1 : 0
