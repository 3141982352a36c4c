/**
 * A change to Flushwave measured against a commit on Flushwave's own client work: own-cpu.ts's
 * units of work (an executor that answers at once, no server) on the sources at `ref` (default
 * HEAD) and on the working tree's, in turn, each right after a full GC, as the bench takes its
 * samples. Prints both medians and the per-round ratio with its interquartile range.
 *
 * Two processes do not compare well enough for this either: own-cpu.ts on one commit gave 161 to
 * 212 µs in runs of the same day. Each side runs in an isolate of its own, as in ab.ts: two copies
 * of one commit compared 1.020 and 1.012 (600 rounds, interquartile ranges about ±12%), so only a
 * change of more than a few percent shows.
 *
 *   pnpm --filter bench exec tsx src/ab-own.ts mixedFlush 10 1500 [ref]
 */
import { commitOf, median, perRound, sampleInRounds, startSide } from './ab-sides.js'

const [scenario = 'mixedFlush', size = '10', rounds = '1500', ref = 'HEAD'] = process.argv.slice(2)
const commit = commitOf(ref)
const own = { mode: 'own', scenario, size: Number(size) } as const
const sides = await Promise.all([startSide(`${ref} (${commit.slice(0, 7)})`, { ...own, side: commit }), startSide('working tree', { ...own, side: 'working tree' })])
const times = await sampleInRounds(sides, Number(rounds), (round, s) => ({ marker: '', key: round * 2 + s }))
for (const side of sides) await side.close()

console.log(`${scenario}×${size}, Flushwave's own work right after a full GC, ${times[0]!.length} rounds:`)
console.log(`  ${sides[0]!.name} median ${median(times[0]!).toFixed(0)} µs; working tree ${median(times[1]!).toFixed(0)} µs`)
console.log(`  working tree ÷ ${sides[0]!.name}, per round: ${perRound(times[1]!, times[0]!)}`)
