/**
 * Flushwave's own client work per unit of work, without a database: `em.create` and the rest of the
 * unit of work, then the flush up to the executor (checks, change set, plan, SQL) and after it
 * (record), with an executor that answers at once. What is left when the server, the driver and
 * the network are taken out, measured in four states of the process, sample by sample in turn:
 *
 * - `hot`: right after the previous sample, as in a tight loop;
 * - `after GC`: after a full GC and a 3 ms pause, as the benchmark takes every sample;
 * - `cold caches`: after 3 ms of writes over 32 MiB, which evicts the CPU's caches without a GC;
 * - `minor GC`: after a young-generation GC and a 3 ms pause. All compiled code survives it,
 *   whereas a major GC frees the optimised code of closures no longer alive (see updateOp in
 *   planner.ts).
 *
 * Medians are steady to a few µs from run to run (no server shares the 2 cores), so a change to the
 * flush path shows here before it can show in the benchmark's noise.
 *
 *   pnpm --filter bench exec tsx src/own-cpu.ts mixedFlush 10 2000
 *   pnpm --filter bench exec tsx src/own-cpu.ts bulkCreate 1 2000
 *
 * A fourth argument picks states, in turn: `'after GC'` alone runs every unit of work right after
 * a full GC, with nothing run between two of them, as in the benchmark (where the other series
 * run between two of Flushwave's samples). That costs more than `after GC` among the other states,
 * whose runs keep more of Flushwave's compiled code and hidden classes alive.
 *
 * CURVE=n also prints each state's median per n rounds from the first, warm-up included: how the
 * cost falls as V8 optimises the flush path (its once-per-flush functions take hundreds of flushes).
 */
import * as library from 'flushwave'
import { fullGc, minorGc } from './gc.js'
import { instantUnits } from './instant-units.js'
import { quantile, sortedCopy } from './stats.js'

const [scenario = 'mixedFlush', size = '10', rounds = '2000', only] = process.argv.slice(2)

/** Untimed: what the unit of work needs (the finds of mixedFlush among it); returns the timed part. */
const prepare = instantUnits(library, scenario, Number(size))

const evict = new Float64Array(4 << 20) // 32 MiB
function evictCaches(): void {
  const until = performance.now() + 3
  for (let i = 0; performance.now() < until; ) for (let k = 0; k < 4096; k++) evict[(i += 4099) & (evict.length - 1)]! += 1
}

const states: Record<string, () => Promise<void> | void> = {
  hot: () => {},
  'after GC': fullGc,
  'cold caches': evictCaches,
  'minor GC': minorGc,
}
const names = only === undefined ? Object.keys(states) : only.split(',')
for (const name of names) if (!(name in states)) throw new Error(`own-cpu.ts states are ${Object.keys(states).join(', ')}, not ${name}`)
const times = names.map(() => [] as number[])
const curve = process.env.CURVE === undefined ? undefined : Number(process.env.CURVE)
if (curve !== undefined && !(Number.isInteger(curve) && curve > 0)) throw new Error(`CURVE is a number of rounds, not ${process.env.CURVE}`)
const everyRun = names.map(() => [] as number[])
const total = Number(rounds)
for (let round = 0; round < total; round++) {
  for (let k = 0; k < names.length; k++) {
    const s = (round + k) % names.length // rotate which state follows which
    const run = await prepare(round * names.length + k)
    await states[names[s]!]!()
    const started = performance.now()
    await run()
    const us = (performance.now() - started) * 1000
    everyRun[s]!.push(us)
    // The first quarter warms the process up.
    if (round >= total / 4) times[s]!.push(us)
  }
}
for (const [s, name] of names.entries()) {
  const sorted = sortedCopy(times[s]!)
  console.log(`${scenario}×${size} ${name.padEnd(11)} median ${quantile(sorted, 0.5).toFixed(0).padStart(5)} µs, p90 ${quantile(sorted, 0.9).toFixed(0).padStart(5)} µs (${sorted.length} samples)`)
  if (curve === undefined) continue
  const medians: string[] = []
  for (let from = 0; from < everyRun[s]!.length; from += curve) medians.push(`${from + 1}–${Math.min(from + curve, everyRun[s]!.length)}: ${quantile(sortedCopy(everyRun[s]!.slice(from, from + curve)), 0.5).toFixed(0)}`)
  console.log(`  median µs by rounds: ${medians.join(', ')}`)
}
