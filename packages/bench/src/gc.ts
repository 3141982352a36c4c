import v8 from 'node:v8'
import vm from 'node:vm'

// A full collection before every timed sample, so one series' garbage is never collected inside
// another's timed unit of work (major GCs landing at random were a large part of cells that did not
// repeat). Exposed at run time, so the bench needs no node flag.
v8.setFlagsFromString('--expose-gc')
const collect = vm.runInNewContext('gc') as (options?: { type: 'major' | 'minor' }) => void

/** Collects, then yields a few ms so V8's concurrent sweeping is done before the clock starts. */
export async function fullGc(): Promise<void> {
  collect()
  await new Promise((resolve) => setTimeout(resolve, 3))
}

/** Collects the young generation only (old objects and compiled code stay), then yields as fullGc does. */
export async function minorGc(): Promise<void> {
  collect({ type: 'minor' })
  await new Promise((resolve) => setTimeout(resolve, 3))
}
