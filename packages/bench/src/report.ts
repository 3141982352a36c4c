import { phaseTable, type PhaseRow } from './phases.js'
import { BASE, type Run } from './runner.js'
import { isScale, scaleTable, timesAgainst } from './scale-report.js'
import { SMALL_YOUNG_GENERATION, STREAM_BUDGET_MB, streamRunName, type StreamMemoryRow } from './stream-memory.js'
import { throughputTable, type ThroughputRow } from './throughput.js'

export interface Results {
  readonly startedAt: string
  readonly machine: Record<string, string | number>
  readonly runs: readonly Run[]
  /** Series that could not be loaded or failed verification, with the error. */
  readonly unavailable: readonly { readonly series: string; readonly error: string }[]
  readonly durationS: number
  /** scale series skipped at a size, and why. */
  readonly scaleNotes?: readonly string[]
  /** The same for typesScale; absent in runs made before it existed. */
  readonly typesScaleNotes?: readonly string[]
  /** Series not run for a case at higher latencies after one very slow run. */
  readonly slowNotes?: readonly string[]
  readonly throughput?: readonly ThroughputRow[]
  readonly phases?: readonly PhaseRow[]
  /** em.stream over a million rows, a child process per driver (stream-memory.ts). */
  readonly streamMemory?: readonly StreamMemoryRow[]
  /** Untimed units of work per series before each case's first cell (main.ts); absent in runs made before it existed. */
  readonly warmUp?: { readonly rounds: number; readonly ms: number }
}

/** One table per scenario and size: a row per series, a column per latency, ratios to flushwave. */
export function markdown(results: Results, options: { tails?: boolean; charts?: string } = {}): string {
  const lines = [
    `# Flushwave benchmark`,
    '',
    `${results.startedAt.slice(0, 10)} · ${Object.entries(results.machine).map(([k, v]) => `${k}: ${v}`).join(' · ')} · ${results.durationS.toFixed(0)} s`,
    '',
    ...LEGEND,
    warmUpText(results.warmUp),
  ]
  const cells = groupBy(results.runs.filter((r) => !isScale(r.scenario)), (r) => `${r.scenario} ${r.size}`)
  for (const runs of cells.values()) lines.push('', ...cellTable(runs))
  lines.push(...extras(results, '##', options.charts))
  if (cells.size > 0 && options.tails !== false) lines.push('', '## Tails', '', 'p95 / p99 ms per unit of work, from the same samples as the medians above.')
  if (options.tails !== false) for (const runs of cells.values()) lines.push('', ...tailTable(runs))
  const slow = results.slowNotes ?? []
  if (slow.length > 0) lines.push('', '## Cut short', '', ...slow.map((n) => `- ${n}`))
  if (results.unavailable.length > 0) {
    lines.push('', '## Not measured', '')
    for (const u of results.unavailable) lines.push(`- **${u.series}**: ${u.error.split('\n')[0]}`)
  }
  return lines.join('\n') + '\n'
}

/** The sections after the cell tables: scale, typesScale, throughput, phases. */
export function extras(results: Results, heading = '##', charts?: string): string[] {
  const lines: string[] = []
  const scale = results.runs.filter((r) => r.scenario === 'scale')
  if (scale.length > 0) {
    lines.push('', `${heading} scale`, '', ...SCALE_LEGEND, '', scaleTable(scale))
    for (const note of results.scaleNotes ?? []) lines.push(`- ${note}`)
    if (charts) lines.push('', `![scale: µs per row against rows, log axes](${charts}latest-scale.svg)`)
  }
  const typed = results.runs.filter((r) => r.scenario === 'typesScale')
  if (typed.length > 0) {
    lines.push('', `${heading} typesScale`, '', ...TYPES_SCALE_LEGEND, '', scaleTable(typed))
    for (const note of results.typesScaleNotes ?? []) lines.push(`- ${note}`)
    const times = ['raw-pipelined', 'raw-sequential'].flatMap((s) => timesAgainst(typed, s) ?? [])
    if (times.length > 0) lines.push('', ...times)
    if (charts) lines.push('', `![typesScale: µs per row against rows, log axes](${charts}latest-typesScale.svg)`)
  }
  const tp = results.throughput
  if (tp && tp.length > 0) {
    const t = tp[0]!
    lines.push('', `${heading} throughput`, '')
    const rounds = t.perRound?.length ?? 1
    lines.push(`${t.clients} clients, each doing mixedFlush ×5 (load the rows, then one unit of work) one after another`)
    lines.push(`on one series instance with a pool of ${t.poolSize} connections, at ${t.latencyMs} ms latency, for ${(t.seconds / rounds).toFixed(0)} s a round;`)
    lines.push(`the series take turns, ${rounds} rounds in rotating order. flushes/s counts whole requests (the load of the rows, as`,
      'every series reads them, and the flush) and is the median of the rounds; `÷ flushwave` is flushwave\'s flushes/s over',
      'the series\' in the same round (median, lowest–highest; above 1 is slower). p50 and p99 are of the flush alone.',
      'flushwave-begin is left out: postgres.js refuses its `sql.begin` on a pool of 10.', '', throughputTable(tp))
    if (charts) lines.push('', `![throughput: flushes per second per series](${charts}latest-throughput.svg)`)
  }
  const sm = results.streamMemory
  if (sm && sm.length > 0) lines.push('', `${heading} em.stream memory`, '', ...STREAM_LEGEND, '', ...streamTable(sm))
  const ph = results.phases
  if (ph && ph.length > 0) lines.push('', `${heading} where a flush's time goes`, '', ...PHASE_LEGEND, '', phaseTable(ph))
  return lines
}

export const STREAM_LEGEND = [
  "`em.stream('T01', {}, { batchSize: 1000 })` over every row of a table of a million (id, name, value,",
  'updated_at), straight to the database, each driver in a fresh child process: RSS and heapUsed sampled',
  'once per batch, against their values after connecting, a short warm-up stream and a full GC. The',
  `goal: the peak RSS within ${STREAM_BUDGET_MB} MB of the start. \`postgres.js cursor, no ORM\` streams the same rows through`,
  "postgres.js's own cursor (`.cursor(1000)`): what the driver and V8's heap sizing cost without Flushwave. Most of",
  "the peak is V8's: its young generation grows to 32 MB (two 16 MB semi-spaces) in a loop that allocates fast, and what leaves it waits",
  `for the next major GC. The rows with \`node ${SMALL_YOUNG_GENERATION}\` run the same child with the young generation`,
  'capped. `heap after` is heapUsed after the loop and a full GC: what the stream kept.',
]

function streamTable(rows: readonly StreamMemoryRow[]): string[] {
  return [
    '| driver | rows | s | rows/s | RSS start MB | RSS peak MB | peak − start | heapUsed peak MB | heap after MB | within goal |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|',
    ...rows.map(
      (r) =>
        `| ${streamRunName(r)} | ${r.rows.toLocaleString('en')} | ${r.seconds.toFixed(1)} | ${Math.round(r.rows / r.seconds).toLocaleString('en')} | ` +
        `${r.startRssMb.toFixed(1)} | ${r.peakRssMb.toFixed(1)} | ${(r.peakRssMb - r.startRssMb).toFixed(1)} | ${r.peakHeapMb.toFixed(1)} | ${r.endHeapMb.toFixed(1)} | ${r.holds ? 'yes' : 'no'} |`,
    ),
  ]
}

export const SCALE_LEGEND = [
  'µs per row (median of the run, ÷ rows) of one unit of work inserting N new rows into one table,',
  'at 0 ms latency: what grows with N is client work and PostgreSQL\'s. Flushwave: `em.create` × N,',
  '`flush`; raw-pipelined: ids from `nextval`, one `unnest` insert, in a transaction; MikroORM:',
  '`em.create` × N, `flush`; TypeORM: `insert` of an array per 10,000 rows; Drizzle:',
  '`insert().values()` per 10,000 rows (PostgreSQL takes at most 65,535 parameters); Prisma:',
  '`createMany`. Each in a transaction. A series whose projected time at the next size is over',
  'the cap is skipped there (listed below the table).',
]

export const TYPES_SCALE_LEGEND = [
  'As scale, on a table with one column of each newer column type: smallint, double, real, date, time,',
  'timestamp, interval, bytea (32 random bytes), varchar(20), char(3), citext, inet, cidr, text[] and',
  'int4[] (3 elements each); every value differs from row to row. Flushwave: `em.create` × N, `flush`.',
  'raw-pipelined, the floor: ids from `nextval` untimed, then BEGIN, `insert … select … from',
  'unnest($1::int8[], $2::int2[], …)` and COMMIT in one pipeline; bytea as hex text `decode`d, and',
  "each row's array as its literal (built by hand) in a text[], cast back by name, as Flushwave sends",
  'them (`unnest` would flatten an array of arrays). raw-sequential: the same inserts as scale writes',
  'them, ids from `nextval` in the transaction, each statement awaited in `sql.begin`. Both write',
  '10,000 rows per statement at most, as Flushwave does. The peer ORMs do not run it. Ratios as in',
  'the cell tables (series ÷ flushwave); below the table, flushwave ÷ the hand-written inserts, the',
  'way round the acceptance bound (1.5× at 10,000 rows) is stated.',
]

export const PHASE_LEGEND = [
  'Median ms per phase of a Flushwave flush (postgres.js executor, 0 ms latency, warm instance): `create`',
  'is the harness timing the `em.create` calls (for cpuFlush, setting 10,000 values); the rest are the',
  "FlushResult's `phases`, which sum to its `durationMs`. `ids` and `write` include waiting on the",
  'server; every other phase is client CPU.',
]

export const LEGEND = [
  'Median ms per unit of work, then the ratio to `flushwave` in the same cell (above 1 is slower):',
  'the median of all pairwise ratios (every sample of the series ÷ every sample of flushwave, a',
  'Hodges–Lehmann estimate: steadier from run to run than the ratio of two medians), and in brackets',
  "the interquartile range of the per-round ratios (a series' sample ÷ flushwave's sample of the same",
  'round). The series of a cell are sampled in rounds: each round, every series once, with untimed',
  'preparation and a full GC before each timed run, the order rotating by one per round. Tables are',
  'emptied between samples with DELETE, not TRUNCATE, so that no series rebuilds its catalog caches',
  'in a timed run (empty-tables.ts).',
  'A narrow bracket around a ratio means that ratio repeats; a bracket that straddles 1 means no',
  'difference this machine can show. `stmts` and `rtt`: SQL statements (BEGIN and COMMIT included) and',
  'round trips counted on the wire in a warm run at the highest latency. coldFlush is bulkCreate ×1 on',
  'a series instance opened just before (connection open, `select 1` run), one instance per sample.',
]

export function warmUpText(warmUp: Results['warmUp']): string {
  if (!warmUp) return 'Before sampling, each series ran one verified and one warm unit of work per cell.'
  if (warmUp.rounds === 0) return 'No warm-up (`--warm-up 0`): each case\'s first cell times every series from its first units of work, while V8 is still compiling them.'
  return `Before a case's first cell (its lowest latency), each series ran ${warmUp.rounds} untimed units of work of it (at most ${warmUp.ms / 1000} s), so that cells time compiled code, not V8 compiling it (\`--warm-up 0\` times a cold process).`
}

/** A case's name as the tables title it: `bulkCreate ×1`, `bulkUpdate`. */
export const title = (r: Pick<Run, 'scenario' | 'size'>) => `${r.scenario}${r.size ? ` ×${r.size}` : ''}`
/** A median as a cell shows it: two decimals under 1 ms, so that 0.08 does not read as 0.1. */
export const ms = (v: number) => (v < 1 ? v.toFixed(2) : v.toFixed(1))
const latenciesOf = (runs: readonly Run[]) => [...new Set(runs.map((r) => r.latencyMs))].sort((a, b) => a - b)
const seriesOf = (runs: readonly Run[]) => [...new Set(runs.map((r) => r.series))]

export function ratioText(run: Run): string {
  if (!run.ratio || run.series === BASE) return ''
  const { median, q1, q3 } = run.ratio
  return run.samples > 1 ? ` · ${median.toFixed(2)}× (${q1.toFixed(2)}–${q3.toFixed(2)})` : ` · ${median.toFixed(2)}×`
}

/** A case's table: a row per series, a column per latency, with statements and round trips on the wire. */
export function cellTable(runs: readonly Run[], heading = '##'): string[] {
  const latencies = latenciesOf(runs)
  const lines = [`${heading} ${title(runs[0]!)}`, '', `| series | ${latencies.map((l) => `${l} ms`).join(' | ')} | stmts | rtt |`, `|---|${latencies.map(() => '---:').join('|')}|---:|---:|`]
  for (const s of seriesOf(runs)) {
    const row = latencies.map((l) => {
      const run = runs.find((r) => r.series === s && r.latencyMs === l)
      return run ? `${ms(run.medianMs)}${ratioText(run)}${run.samples === 1 ? ' (1 run)' : ''}` : '–'
    })
    // Counted at the highest latency, where a client that does not wait cannot look like one that does.
    const ref = runs.filter((r) => r.series === s).sort((a, b) => b.latencyMs - a.latencyMs)[0]
    lines.push(`| ${s} | ${row.join(' | ')} | ${ref?.statements ?? '?'} | ${ref?.roundTrips ?? '?'} |`)
  }
  return lines
}

/** p95 / p99 per series and latency, from the same samples as the medians. */
export function tailTable(runs: readonly Run[], heading = '###'): string[] {
  const latencies = latenciesOf(runs)
  const lines = [`${heading} ${title(runs[0]!)}`, '', `| series | ${latencies.map((l) => `${l} ms`).join(' | ')} | n |`, `|---|${latencies.map(() => '---:').join('|')}|---:|`]
  for (const s of seriesOf(runs)) {
    const mine = runs.filter((r) => r.series === s)
    const row = latencies.map((l) => {
      const run = mine.find((r) => r.latencyMs === l)
      return run ? `${ms(run.p95Ms)} / ${ms(run.p99Ms)}` : '–'
    })
    lines.push(`| ${s} | ${row.join(' | ')} | ${Math.min(...mine.map((r) => r.samples))} |`)
  }
  return lines
}

export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>()
  for (const item of items) {
    const k = key(item)
    const list = out.get(k)
    if (list) list.push(item)
    else out.set(k, [item])
  }
  return out
}
