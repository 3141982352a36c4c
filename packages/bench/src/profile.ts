/** Profiling aid: runs one scenario of one series in a loop, straight to the database. */
import { startDatabase } from 'devdb'
import { benchDatabase } from './database.js'
import { scenario, type ScenarioName } from './scenarios.js'
import { loadSeries } from './series/index.js'

const [name = 'flushwave', scenarioName = 'bulkCreate', size = '1', rounds = '200'] = process.argv.slice(2)
const db = await startDatabase()
const bench = await benchDatabase(db.url)
const series = await (await loadSeries(name)).open(bench.url)
const sc = scenario(scenarioName as ScenarioName, Number(size))
const times: number[] = []
for (let i = 0; i < Number(rounds); i++) {
  const p = await sc.prepare(bench.admin, series, `p${i}`)
  const t0 = performance.now()
  await p.run()
  times.push(performance.now() - t0)
}
times.sort((a, b) => a - b)
console.log(`${name} ${scenarioName}×${size}: median ${times[times.length >> 1]!.toFixed(2)} ms, min ${times[0]!.toFixed(2)} ms`)
await series.close()
await bench.drop()
await db.stop()
