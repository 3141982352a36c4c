import type postgres from 'postgres'
import { fullGc } from './gc.js'
import { scenario, type Prepared, type ScenarioName } from './scenarios.js'
import type { Series } from './series/types.js'
import { quantile, ratio, round2, sortedCopy, type Ratio } from './stats.js'
import type { WireCounter } from './wire.js'

export interface Case {
  readonly scenario: ScenarioName
  /** 0 where the scenario has no size. */
  readonly size: number
  /** Client-CPU scenarios run at 0 ms only. */
  readonly zeroLatencyOnly: boolean
  /** The latencies the case runs at when none are given (`--latency`); all of them when absent. */
  readonly latencies?: readonly number[]
}

export interface Run {
  readonly scenario: ScenarioName
  readonly size: number
  readonly series: string
  readonly latencyMs: number
  readonly samples: number
  readonly medianMs: number
  readonly p95Ms: number
  readonly p99Ms: number
  /** Every timed sample, ms, in round order (for re-analysis). */
  readonly samplesMs: readonly number[]
  /** Against `flushwave` in the same cell (null without it); see stats.ts. */
  readonly ratio: Ratio | null
  /** SQL statements the unit of work sent (Execute and Query messages, BEGIN and COMMIT included). */
  readonly statements: number | null
  /** Times the client sent after the server had answered, on the wire. */
  readonly roundTrips: number | null
}

export interface MeasureOptions {
  /** Time to spend sampling one series in one cell, beyond its verification and warm-up runs. */
  readonly budgetMs: number
  readonly minSamples: number
  readonly maxSamples: number
  /**
   * Untimed units of work per series before its samples, up to `rounds` or `ms` per series,
   * whichever ends first (see measureCell); none when absent.
   */
  readonly warmUp?: { readonly rounds: number; readonly ms: number }
}

/**
 * What a cell times: a series, already open (`acquire` hands it out, `release` does nothing), or
 * opened afresh for every sample (coldFlush: `acquire` opens, `release` closes; both untimed).
 */
export interface Subject {
  readonly name: string
  acquire(): Promise<Lease>
}

export interface Lease {
  readonly series: Series
  release(): Promise<void>
}

export interface CellResult {
  readonly runs: Run[]
  /** Series that failed verification (or a later run): the caller drops them from later cells. */
  readonly failures: { readonly series: string; readonly error: unknown }[]
}

export const BASE = 'flushwave'

let markers = 0
const marker = () => `m${process.pid}x${++markers}`

/**
 * One cell, every series in it interleaved: first, per series, a verified run and a warm run whose
 * statements and round trips are recorded (as before), then `options.warmUp` untimed (V8 compiles a
 * series' own code over its first hundreds of units of work; without it, a case's first cell times
 * that); then rounds, in each of which every series prepares untimed and runs once timed, the
 * order rotating by one per round. A slow moment of the shared machine, or the server's background
 * work after a big cell, then falls on every series of a round alike instead of on whichever series
 * happened to be sampled then.
 */
export async function measureCell(
  c: Case,
  subjects: readonly Subject[],
  admin: postgres.Sql,
  wire: WireCounter,
  latencyMs: number,
  options: MeasureOptions,
): Promise<CellResult> {
  const sc = scenario(c.scenario, c.size)
  const failures: { series: string; error: unknown }[] = []
  const once = async (subject: Subject, count: boolean) => {
    const lease = await subject.acquire()
    try {
      const prepared: Prepared = await sc.prepare(admin, lease.series, marker())
      await fullGc()
      if (count) wire.reset()
      const started = performance.now()
      await prepared.run()
      const ms = performance.now() - started
      return { ms, prepared, statements: wire.statements, roundTrips: wire.roundTrips }
    } finally {
      await lease.release()
    }
  }

  /** One untimed unit of work: no GC before it, nothing counted. */
  const warm = async (subject: Subject) => {
    const lease = await subject.acquire()
    try {
      await (await sc.prepare(admin, lease.series, marker())).run()
    } finally {
      await lease.release()
    }
  }

  interface Entry {
    readonly subject: Subject
    firstMs: number
    statements: number
    roundTrips: number
    readonly samples: number[]
  }
  const entries: Entry[] = []
  for (const subject of subjects) {
    try {
      const first = await once(subject, true)
      await first.prepared.verify(admin)
      const entry: Entry = { subject, firstMs: first.ms, statements: first.statements, roundTrips: first.roundTrips, samples: [] }
      // A unit of work slower than the whole budget (Prisma's 12,000 statements at 10 ms) is reported
      // from its verified run alone, with samples: 1, rather than holding the run for many minutes.
      if (first.ms <= options.budgetMs) {
        const warm = await once(subject, true)
        entry.firstMs = Math.min(entry.firstMs, warm.ms)
        entry.statements = warm.statements
        entry.roundTrips = warm.roundTrips
      } else {
        entry.samples.push(first.ms)
      }
      entries.push(entry)
    } catch (error) {
      failures.push({ series: subject.name, error })
    }
  }

  let sampled = entries.filter((e) => e.samples.length === 0)
  /** A series that fails after its verified run is dropped from the cell (and, by the caller, from later cells). */
  const drop = (entry: Entry, error: unknown) => {
    failures.push({ series: entry.subject.name, error })
    sampled = sampled.filter((e) => e !== entry)
    entries.splice(entries.indexOf(entry), 1)
  }
  if (options.warmUp) {
    for (const entry of [...sampled]) {
      const until = performance.now() + options.warmUp.ms
      try {
        for (let i = 0; i < options.warmUp.rounds && performance.now() < until; i++) await warm(entry.subject)
      } catch (error) {
        drop(entry, error)
      }
    }
  }
  const perRound = sampled.reduce((sum, e) => sum + Math.max(e.firstMs, 0.1), 0)
  const rounds = Math.max(options.minSamples, Math.min(options.maxSamples, Math.floor((options.budgetMs * sampled.length) / Math.max(perRound, 0.1))))
  for (let r = 0; r < rounds && sampled.length > 0; r++) {
    const order = sampled.map((_, i) => sampled[(i + r) % sampled.length]!)
    for (const entry of order) {
      try {
        entry.samples.push((await once(entry.subject, false)).ms)
      } catch (error) {
        drop(entry, error)
      }
    }
  }

  const base = entries.find((e) => e.subject.name === BASE)?.samples
  const runs = entries.map((e): Run => {
    const sorted = sortedCopy(e.samples)
    const r = base && base.length > 0 ? ratio(e.samples, base) : null
    return {
      scenario: c.scenario,
      size: c.size,
      series: e.subject.name,
      latencyMs,
      samples: sorted.length,
      samplesMs: e.samples.map(round2),
      medianMs: round2(quantile(sorted, 0.5)),
      p95Ms: round2(quantile(sorted, 0.95)),
      p99Ms: round2(quantile(sorted, 0.99)),
      ratio: r && { median: round3(r.median), q1: round3(r.q1), q3: round3(r.q3) },
      statements: e.statements,
      roundTrips: e.roundTrips,
    }
  })
  return { runs, failures }
}

const round3 = (x: number) => Math.round(x * 1000) / 1000
