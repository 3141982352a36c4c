/**
 * A change to Flushwave measured against a commit: the sources at `ref` (default HEAD) and the
 * working tree's, with hand-written SQL beside them, one sample of each per round (order rotating,
 * a full GC before each), straight to the embedded server, at the same time on the same machine.
 * Wall time per unit of work and the ratio of the two Flushwaves, round by round.
 *
 * Sampled in turn, because two processes run one after the other do not compare: the same code
 * differed by more than most changes make (mixedFlush×10 on one commit: 1,509–1,526 µs in two runs
 * and 1,638–1,667 in two others an hour apart).
 *
 * Each side in a worker thread of its own (ab-worker.ts), a V8 isolate of its own: when both
 * copies shared one isolate, a change that kept the last flush's objects alive across major GCs
 * kept the base copy's hidden classes too, and measured 1.037 where isolated sides give 0.956.
 * Every order of the sides in turn (ab-sides.ts): two copies of one commit compared 0.990 and 1.012
 * (225 rounds each), so a change under 2% does not show.
 *
 *   pnpm --filter bench exec tsx src/ab.ts mixedFlush 10 300 [ref]
 *
 * The commit's sources come from library-at.ts. ab-own.ts does the same for Flushwave's own work.
 */
import { startDatabase } from 'devdb'
import { commitOf, median, perRound, sampleInRounds, startSide } from './ab-sides.js'
import { benchDatabase } from './database.js'
import { quantile, sortedCopy } from './stats.js'

const [scenario = 'mixedFlush', size = '10', rounds = '300', ref = 'HEAD'] = process.argv.slice(2)
const commit = commitOf(ref)

const db = await startDatabase()
const bench = await benchDatabase(db.url)
const wire = { mode: 'wire', url: bench.url, scenario, size: Number(size) } as const
const sides = await Promise.all([
  startSide(`${ref} (${commit.slice(0, 7)})`, { ...wire, side: commit }),
  startSide('working tree', { ...wire, side: 'working tree' }),
  startSide('raw-pipelined', { ...wire, side: 'raw-pipelined' }),
])
const times = await sampleInRounds(sides, Number(rounds), (round, s) => ({ marker: `ab${round}s${s}`, key: 0 }))
for (const side of sides) await side.close()
await bench.drop()
await db.stop()

console.log(`${scenario}×${size}, ${times[0]!.length} rounds, a full GC before each sample:`)
for (const [s, side] of sides.entries()) {
  console.log(`  ${side.name.padEnd(24)} median ${median(times[s]!).toFixed(0).padStart(6)} µs, p90 ${quantile(sortedCopy(times[s]!), 0.9).toFixed(0).padStart(6)} µs`)
}
console.log(`  working tree ÷ ${sides[0]!.name}, per round: ${perRound(times[1]!, times[0]!)}`)
for (const s of [0, 1]) console.log(`  raw-pipelined ÷ ${sides[s]!.name}, per round: ${perRound(times[2]!, times[s]!)}`)
