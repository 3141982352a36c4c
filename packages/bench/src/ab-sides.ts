import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import type { AbRequest, AbSide } from './ab-worker.js'
import { quantile, sortedCopy } from './stats.js'

/** A side of an A/B comparison, running in its own worker thread (ab-worker.ts). */
export interface Side {
  readonly name: string
  /** One timed sample, in µs. */
  sample(request: AbRequest): Promise<number>
  close(): Promise<void>
}

// A worker does not inherit tsx's loader: it registers it, then imports the TypeScript module.
const WORKER = `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(new URL('./ab-worker.ts', import.meta.url).href)}) })`

/** The commit `ref` names, in full. */
export function commitOf(ref: string): string {
  return execFileSync('git', ['rev-parse', '--verify', `${ref}^{commit}`], { encoding: 'utf8' }).trim()
}

export async function startSide(name: string, side: AbSide): Promise<Side> {
  const worker = new Worker(WORKER, { eval: true, workerData: side })
  const [ready] = (await once(worker, 'message')) as [unknown]
  if (ready !== 'ready') throw new Error(`ab-worker for ${name} said ${String(ready)}`)
  return {
    name,
    async sample(request) {
      worker.postMessage(request)
      const [us] = (await once(worker, 'message')) as [number]
      return us
    },
    async close() {
      worker.postMessage(null)
      await once(worker, 'exit')
    },
  }
}

/**
 * `rounds` rounds of one sample per side, each round in the next of all the sides' orders, so that
 * every side follows every other equally often (rotating by one, the working tree always followed
 * the base in ab.ts, and two copies of one commit compared 1.028). The first quarter warms up and
 * is dropped. Returns each side's samples, round by round.
 */
export async function sampleInRounds(sides: readonly Side[], rounds: number, request: (round: number, side: number) => AbRequest): Promise<number[][]> {
  const orders = permutations(sides.map((_, s) => s))
  const times = sides.map(() => [] as number[])
  for (let round = 0; round < rounds; round++) {
    const us = sides.map(() => 0)
    for (const s of orders[round % orders.length]!) us[s] = await sides[s]!.sample(request(round, s))
    if (round >= rounds / 4) us.forEach((t, s) => times[s]!.push(t))
  }
  return times
}

function permutations(items: readonly number[]): number[][] {
  if (items.length <= 1) return [[...items]]
  return items.flatMap((first, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [first, ...rest]))
}

export const median = (xs: readonly number[]): number => quantile(sortedCopy(xs), 0.5)

/** Per round, `a`'s sample ÷ `b`'s: the median and the interquartile range. */
export function perRound(a: readonly number[], b: readonly number[]): string {
  const sorted = sortedCopy(a.map((t, i) => t / b[i]!))
  return `median ${quantile(sorted, 0.5).toFixed(3)} (interquartile ${quantile(sorted, 0.25).toFixed(3)}–${quantile(sorted, 0.75).toFixed(3)})`
}
