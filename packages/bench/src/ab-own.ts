/**
 * A change to Flushwave measured against a commit on Flushwave's own client work, in one process:
 * own-cpu.ts's units of work (an executor that answers at once, no server) on the sources at `ref`
 * (default HEAD) and on the working tree's, in turn, each right after a full GC, as the bench takes
 * its samples. Prints both medians and the per-round ratio with its interquartile range.
 *
 * Two processes do not compare well enough for this either: own-cpu.ts on one commit gave 161 to
 * 212 µs in runs of the same day. Here two copies of one commit gave 1.000 and 1.015 in two runs of
 * 1,125 rounds (interquartile ranges about ±6%), so a change of a few percent shows.
 *
 *   pnpm --filter bench exec tsx src/ab-own.ts mixedFlush 10 1500 [ref]
 */
import * as workingTree from 'flushwave'
import { fullGc } from './gc.js'
import { instantUnits } from './instant-units.js'
import { libraryAt } from './library-at.js'
import { quantile, sortedCopy } from './stats.js'

const [scenario = 'mixedFlush', size = '10', rounds = '1500', ref = 'HEAD'] = process.argv.slice(2)
const { commit, library: base } = await libraryAt(ref)
const prepare = [instantUnits(base, scenario, Number(size)), instantUnits(workingTree, scenario, Number(size))]

const times: [number[], number[]] = [[], []]
const total = Number(rounds)
for (let round = 0; round < total; round++) {
  const sample = [0, 0]
  for (let k = 0; k < 2; k++) {
    const s = (round + k) % 2 // which copy goes first alternates
    const run = await prepare[s]!(round * 2 + s)
    await fullGc()
    const started = performance.now()
    await run()
    sample[s] = (performance.now() - started) * 1000
  }
  // The first quarter warms the process up.
  if (round >= total / 4) sample.forEach((us, s) => times[s]!.push(us))
}

const sorted = (xs: readonly number[]) => sortedCopy(xs)
const ratios = times[1].map((t, i) => t / times[0][i]!)
console.log(`${scenario}×${size}, Flushwave's own work right after a full GC, ${times[0].length} rounds:`)
console.log(`  ${ref} (${commit.slice(0, 7)}) median ${quantile(sorted(times[0]), 0.5).toFixed(0)} µs; working tree ${quantile(sorted(times[1]), 0.5).toFixed(0)} µs`)
console.log(`  working tree ÷ ${ref}, per round: median ${quantile(sorted(ratios), 0.5).toFixed(3)} (interquartile ${quantile(sorted(ratios), 0.25).toFixed(3)}–${quantile(sorted(ratios), 0.75).toFixed(3)})`)
