import { measure } from 'mitata'
import type postgres from 'postgres'
import { scenario, type ScenarioName } from './scenarios.js'
import type { Series } from './series/types.js'
import type { WireCounter } from './wire.js'

export interface Case {
  readonly scenario: ScenarioName
  /** 0 where the scenario has no size. */
  readonly size: number
  /** Client-CPU scenarios run at 0 ms only. */
  readonly zeroLatencyOnly: boolean
}

export interface Run {
  readonly scenario: ScenarioName
  readonly size: number
  readonly series: string
  readonly latencyMs: number
  readonly samples: number
  readonly medianMs: number
  readonly p95Ms: number
  /** SQL statements the unit of work sent (Execute and Query messages, BEGIN and COMMIT included). */
  readonly statements: number | null
  /** Times the client sent after the server had answered, on the wire. */
  readonly roundTrips: number | null
}

export interface MeasureOptions {
  /** Time to spend sampling one cell, beyond its verification and warm-up runs. */
  readonly budgetMs: number
  readonly minSamples: number
  readonly maxSamples: number
}

let markers = 0
const marker = () => `m${process.pid}x${++markers}`

/**
 * One cell: a verified first run, a warm run whose statements and round trips are recorded, then
 * mitata samples; each sample prepares untimed (seeding and loading) and times the unit of work.
 */
export async function measureCell(
  c: Case,
  seriesName: string,
  series: Series,
  admin: postgres.Sql,
  wire: WireCounter,
  latencyMs: number,
  options: MeasureOptions,
): Promise<Run> {
  const sc = scenario(c.scenario, c.size)
  const first = await sc.prepare(admin, series, marker())
  wire.reset()
  let started = performance.now()
  await first.run()
  let elapsed = performance.now() - started
  let statements = wire.statements
  let roundTrips = wire.roundTrips
  await first.verify(admin)

  // A unit of work slower than the whole budget (Prisma's 12,000 statements at 10 ms) is reported
  // from its verified run alone, with samples: 1, rather than holding the run for many minutes.
  if (elapsed <= options.budgetMs) {
    const warm = await sc.prepare(admin, series, marker())
    wire.reset()
    started = performance.now()
    await warm.run()
    elapsed = Math.min(elapsed, performance.now() - started)
    statements = wire.statements
    roundTrips = wire.roundTrips
  }

  const record = (sorted: readonly number[]): Run => ({
    scenario: c.scenario,
    size: c.size,
    series: seriesName,
    latencyMs,
    samples: sorted.length,
    medianMs: round(quantile(sorted, 0.5)),
    p95Ms: round(quantile(sorted, 0.95)),
    statements,
    roundTrips,
  })
  if (elapsed > options.budgetMs) return record([elapsed])

  const samples = Math.max(options.minSamples, Math.min(options.maxSamples, Math.floor(options.budgetMs / Math.max(elapsed, 0.1))))
  const stats = await measure(
    function* () {
      yield {
        [0]: () => sc.prepare(admin, series, marker()),
        bench: (prepared: { run: () => Promise<void> }) => prepared.run(),
      }
    },
    { min_samples: samples, max_samples: samples, min_cpu_time: 0, warmup_samples: 0, batch_samples: 1, batch_threshold: 0 },
  )
  return record([...stats.samples].sort((a, b) => a - b).map((ns) => ns / 1e6))
}

function quantile(sorted: readonly number[], q: number): number {
  const i = (sorted.length - 1) * q
  const lo = Math.floor(i)
  const hi = Math.ceil(i)
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (i - lo)
}

const round = (ms: number) => Math.round(ms * 100) / 100
