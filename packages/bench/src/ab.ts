/**
 * A change to Flushwave measured against a commit, in one process: the sources at `ref` (default
 * HEAD) and the working tree's, with hand-written SQL beside them, one sample of each per round
 * (order rotating, a full GC before each), straight to the embedded server. Wall time per unit of
 * work and the ratio of the two Flushwaves, round by round.
 *
 * One process, because two do not compare here: the same code run in two processes one after the
 * other differed by more than most changes make (mixedFlush×10 on the same commit: 1,509–1,526 µs in
 * two runs and 1,638–1,667 in two others an hour apart; a change that "saved" 130 µs across
 * processes saved nothing sample by sample in one).
 *
 *   pnpm --filter bench exec tsx src/ab.ts mixedFlush 10 300 [ref]
 *
 * The commit's sources come from library-at.ts. ab-own.ts does the same for Flushwave's own work.
 */
import { startDatabase } from 'devdb'
import { benchDatabase } from './database.js'
import { fullGc } from './gc.js'
import { libraryAt } from './library-at.js'
import { scenario, type ScenarioName } from './scenarios.js'
import { flushwaveSeries, series as workingTree } from './series/flushwave.js'
import { series as rawPipelined } from './series/raw-pipelined.js'
import { quantile, sortedCopy } from './stats.js'

const [scenarioName = 'mixedFlush', size = '10', rounds = '300', ref = 'HEAD'] = process.argv.slice(2)
const { commit, library: base } = await libraryAt(ref)

const db = await startDatabase()
const bench = await benchDatabase(db.url)
const names = [`${ref} (${commit.slice(0, 7)})`, 'working tree', 'raw-pipelined']
const opened = await Promise.all([flushwaveSeries('base', undefined, {}, base), workingTree, rawPipelined].map((s) => s.open(bench.url)))
const sc = scenario(scenarioName as ScenarioName, Number(size))
const times = names.map(() => [] as number[])
const total = Number(rounds)
for (let round = 0; round < total; round++) {
  const sample = names.map(() => 0)
  for (let k = 0; k < opened.length; k++) {
    const s = (round + k) % opened.length // rotate which series follows which
    const prepared = await sc.prepare(bench.admin, opened[s]!, `ab${round}s${s}`)
    await fullGc()
    const started = performance.now()
    await prepared.run()
    sample[s] = (performance.now() - started) * 1000
  }
  // The first quarter warms the process and the connections up.
  if (round >= total / 4) sample.forEach((us, s) => times[s]!.push(us))
}
for (const series of opened) await series.close()
await bench.drop()
await db.stop()

const median = (xs: readonly number[]) => quantile(sortedCopy(xs), 0.5)
const ratios = (a: number, b: number) => times[a]!.map((t, i) => t / times[b]![i]!)
const spread = (xs: readonly number[]) => `${quantile(sortedCopy(xs), 0.25).toFixed(3)}–${quantile(sortedCopy(xs), 0.75).toFixed(3)}`
console.log(`${scenarioName}×${size}, ${times[0]!.length} rounds, a full GC before each sample:`)
for (const [s, name] of names.entries()) console.log(`  ${name.padEnd(24)} median ${median(times[s]!).toFixed(0).padStart(6)} µs, p90 ${quantile(sortedCopy(times[s]!), 0.9).toFixed(0).padStart(6)} µs`)
const change = ratios(1, 0)
console.log(`  working tree ÷ ${names[0]}, per round: median ${median(change).toFixed(3)} (interquartile ${spread(change)})`)
for (const s of [0, 1]) console.log(`  raw-pipelined ÷ ${names[s]}, per round: median ${median(ratios(2, s)).toFixed(3)}`)
