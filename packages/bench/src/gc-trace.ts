import { quantile, sortedCopy } from './stats.js'

/**
 * V8's GC trace as `node --trace-gc-nvp` prints it, one line per GC (`gc=s` a scavenge, `gc=mc` a
 * full GC), each `name=value` pairs: read for gc-promotion.ts.
 */

/** One scavenge as `--trace-gc-nvp` prints it. */
export interface Scavenge {
  /** The isolate: the main thread's, or a worker's (tsx's loader runs in one). */
  readonly isolate: string
  readonly pauseMs: number
  readonly promoted: number
  readonly survived: number
}

/** The scavenges in `--trace-gc-nvp` output, in order; other lines (full GCs, the program's own) are skipped. */
export function parseScavenges(trace: string): Scavenge[] {
  const out: Scavenge[] = []
  for (const line of trace.split('\n')) {
    const head = /^\[\d+:(0x[0-9a-f]+)\]\s+[\d.]+ ms: /.exec(line)
    if (!head || !/ gc=s /.test(line)) continue
    const field = (name: string) => Number(new RegExp(`(?:^|\\s)${name}=([\\d.]+)`).exec(line)?.[1] ?? NaN)
    out.push({ isolate: head[1]!, pauseMs: field('pause'), promoted: field('promoted'), survived: field('new_space_survived') })
  }
  return out
}

export interface ScavengeSummary {
  readonly count: number
  readonly pauseMedianMs: number
  readonly pauseMaxMs: number
  readonly promotedKb: number
  readonly survivedKb: number
}

/** The last `last` scavenges of the isolate with the most of them (the main thread's). */
export function summarize(scavenges: readonly Scavenge[], last: number): ScavengeSummary | undefined {
  const perIsolate = new Map<string, Scavenge[]>()
  for (const s of scavenges) {
    const list = perIsolate.get(s.isolate)
    if (list) list.push(s)
    else perIsolate.set(s.isolate, [s])
  }
  const main = [...perIsolate.values()].sort((a, b) => b.length - a.length)[0]
  if (!main || main.length === 0) return undefined
  const tail = main.slice(-last)
  const pauses = sortedCopy(tail.map((s) => s.pauseMs))
  const meanKb = (f: (s: Scavenge) => number) => tail.reduce((sum, s) => sum + f(s), 0) / tail.length / 1024
  return {
    count: tail.length,
    pauseMedianMs: quantile(pauses, 0.5),
    pauseMaxMs: pauses[pauses.length - 1]!,
    promotedKb: meanKb((s) => s.promoted),
    survivedKb: meanKb((s) => s.survived),
  }
}
