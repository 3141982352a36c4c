/**
 * Writes the repository's docs/benchmarks.md from a full run's results: the machine and the date,
 * then for every case a table and a chart, the round trips each series waits on, scale, typesScale, throughput
 * and the phase profile, and how to read and rerun it. Also writes the charts it links to
 * (results/latest-<case>.svg).
 *
 * `pnpm bench` does it after a full default run. By hand, from the last results
 * (results/latest.json): `pnpm --filter bench page`.
 */
import { readFile, writeFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'
import { barChart } from './bar-chart.js'
import { chart } from './chart.js'
import { cellTable, extras, groupBy, ms, tailTable, title, type Results } from './report.js'
import type { Run } from './runner.js'
import { isScale } from './scale-report.js'

const RESULTS = new URL('../results/', import.meta.url)
const PAGE = new URL('../../../docs/benchmarks.md', import.meta.url)
/** The charts, as docs/benchmarks.md reaches them. */
const CHARTS = '../packages/bench/results/'

/** What each case's unit of work does, in the words of its table's heading. */
const CASES: Record<string, (size: number) => string> = {
  bulkCreate: (n) =>
    `${n === 1 ? 'One author' : `${n} authors, each`} with 10 books, 10 reviews per book and 5 new tags per book linked to it: ` +
    `${(211 * n).toLocaleString('en')} rows (the joist-benchmarks bookstore), inserted in one unit of work.`,
  coldFlush: () =>
    'bulkCreate ×1 on a series instance opened just before (its connection open, `select 1` run): the first flush of a new ' +
    'process, with every statement shape new to the connection. One instance per sample.',
  bulkUpdate: () =>
    '10 authors, 10 books, 10 reviews, 10 tags and 10 rows of a plain table, loaded untimed; then one unit of work changes a ' +
    'column or two of all 50 rows.',
  mixedFlush: (n) =>
    `In each of ${n === 1 ? 'one plain table' : `${n} plain tables`}, one row inserted, one updated and one deleted, in one unit of work.`,
  deleteGraph: () =>
    'An author with its 10 books, 100 reviews and 50 tag links, loaded untimed; then one unit of work deletes them all (the tags stay).',
  cpuFlush: (n) =>
    `${n.toLocaleString('en')} rows of one table, loaded untimed; then one unit of work adds 1 to a column of each. At 0 ms only: ` +
    'what grows here is client work and the server\'s.',
  noopFlush: (n) =>
    `The same ${n.toLocaleString('en')} loaded rows, nothing changed, then a flush (or a commit): what finding nothing to write costs. At 0 ms only.`,
  listEndpoint: () =>
    'A list endpoint, read: of 400 books (40 authors, 4,000 reviews), those whose author\'s last name is ILIKE `ad%` and that ' +
    'have a review of 4 stars or more, ordered by title, the first 20 (Flushwave `findPage`, MikroORM `findByCursor`, ' +
    'Prisma `findMany` with relation filters and `take`, Drizzle\'s relational `findMany` with EXISTS, TypeORM a QueryBuilder ' +
    'with `take`); how many there are; and for the page\'s books their reviews, their author and the author\'s books (two ' +
    'levels). Every series reads the same rows, checked: the count, the page\'s ids, the reviews, authors and books loaded. ' +
    'Flushwave starts the page and the count together, then populates a level per round trip; raw-pipelined sends the page ' +
    '(joined to its author), the count and the page\'s reviews (the page as a subquery) together, then the authors\' books. ' +
    'At 0, 2 and 10 ms; flushwave-begin and flushwave-noledger, which differ from flushwave only in writes, do not run it.',
}

/** The cases whose slope against latency the round-trip table shows. */
const SLOPES = [['bulkCreate', 1], ['bulkUpdate', 0], ['mixedFlush', 10], ['deleteGraph', 0], ['listEndpoint', 0]] as const

export async function writeBenchmarksPage(results: Results): Promise<void> {
  const cases = [...groupBy(results.runs.filter((r) => !isScale(r.scenario)), (r) => `${r.scenario} ${r.size}`).values()]
  for (const runs of cases) await writeFile(new URL(chartFile(runs[0]!), RESULTS), caseChart(runs))
  await writeFile(PAGE, page(results, cases, await versions()))
  process.stderr.write(`wrote docs/benchmarks.md and ${cases.length} charts in packages/bench/results/\n`)
}

function page(results: Results, cases: readonly Run[][], peers: Record<string, string>): string {
  const m = results.machine
  const minutes = Math.round(results.durationS / 60)
  const latencies = [...new Set(results.runs.filter((r) => !isScale(r.scenario)).map((r) => r.latencyMs))].sort((a, b) => a - b)
  const lines = [
    '# Benchmarks',
    '',
    '<!-- Written by `pnpm bench` (packages/bench/src/benchmarks-page.ts) from packages/bench/results/latest.json;',
    '     regenerate it with `pnpm --filter bench page` rather than editing it. -->',
    '',
    `What a unit of work costs with Flushwave, next to the same rows written by hand and through ${peerList(results)}, at`,
    `${latencies.length > 1 ? `${latencies.slice(0, -1).join(', ')} and ${latencies.at(-1)}` : latencies.join('')} ms of network latency. After reading this page you can tell how many round`,
    'trips each library waits on, where a flush spends its time, and how to run the benchmark yourself.',
    '',
    `Run of ${results.startedAt.slice(0, 10)}, ${minutes} minutes, on one machine: ${m.cpu && m.cpu !== 'unknown' ? `${m.cpu}, ` : ''}` +
      `${m.cores} cores, ${m.memoryGiB} GiB of memory; Node ${m.node}; PostgreSQL ${m.postgres}; latency added by ${String(m.latency).replace(', downstream', ' to every server→client chunk')}` +
      `${m.pooler ? `; through ${m.pooler}` : ''}. The database, the proxy and the benchmark share the machine.`,
    '',
    '## How to read this',
    '',
    '- A cell is the median ms of one unit of work. For every series but `flushwave` it is followed by the ratio to',
    '  `flushwave` in the same cell (above 1 is slower) and, in brackets, the interquartile range of the per-round ratios.',
    '  The ratio is the median of all pairwise ratios of the two series\' samples.',
    '- A narrow bracket means the ratio repeats. A bracket that straddles 1 means no difference this machine can show.',
    '  The machine is small and shared, so single cells jump from run to run: compare series within a cell, not cells',
    '  across runs.',
    '- `stmts` and `rtt`: the SQL statements (BEGIN and COMMIT included) and the round trips of one unit of work, counted',
    '  on the wire at the highest latency.',
    '- `(1 run)`: the series was so slow that one sample filled the cell\'s time budget.',
    '- Every series does the same unit of work on the same tables, loads what it needs untimed, and has the rows it',
    '  wrote counted before it is timed. The series of a cell run in rounds, one sample each per round, in rotating',
    '  order, with a full garbage collection before each sample.',
    results.warmUp && results.warmUp.rounds > 0
      ? `- Before a case's first cell each series ran ${results.warmUp.rounds} untimed units of work of it (at most ${results.warmUp.ms / 1000} s), so that the cells time compiled code.`
      : '- No warm-up: the first cells time every series while V8 still compiles it.',
    '',
    '## The series',
    '',
    '- `flushwave`: Flushwave on postgres.js. BEGIN, every statement and COMMIT in one pipeline. The outcome ledger\'s',
    '  token and the transaction id go in the statement after BEGIN (counted in `stmts`).',
    '- `flushwave-pg`, `flushwave-knex`: the same pipeline through a node-postgres `pg.Pool` and through knex.',
    '- `flushwave-begin`: the same statements inside postgres.js\'s `sql.begin`, one `Promise.all` per wave: three',
    '  round trips (BEGIN, the statements, COMMIT).',
    '- `flushwave-noledger`: `outcomeLedger: false`, to show what the outcome ledger costs.',
    '  Neither of these two runs listEndpoint: they read as `flushwave` does.',
    '- `flushwave-nootel`: `telemetry: false`, as without `@opentelemetry/api`; `flushwave` runs with the API',
    '  installed and no SDK registered (a no-op tracer and meter), so the two show what instrumentation costs',
    '  when nothing records.',
    '- `raw-pipelined`: hand-written postgres.js SQL for the same rows, ids fetched untimed, sent in one pipeline.',
    '  The floor.',
    '- `raw-sequential`: the same statements awaited one by one inside `sql.begin`. The usual way.',
    `- \`mikro-orm\` (MikroORM ${peers['@mikro-orm/core']}, \`em.flush()\`), \`typeorm\` (TypeORM ${peers.typeorm}, \`transaction\` and \`save\` with`,
    `  cascades), \`prisma\` (Prisma ${peers['@prisma/client']}, an interactive \`$transaction\` with nested \`create\`) and \`drizzle\``,
    `  (Drizzle ${peers['drizzle-orm']}, \`transaction\` with bulk \`insert\`): each used the way its documentation recommends.`,
    '',
    'In bulkCreate, Flushwave writes the two timestamp columns of each row; the other series leave them to the column',
    'default.',
  ]
  lines.push(...roundTrips(results))
  for (const runs of cases) {
    const first = runs[0]!
    lines.push('', ...cellTable(runs, '##').slice(0, 2), CASES[first.scenario]?.(first.size) ?? '', '', ...cellTable(runs).slice(2))
    lines.push('', `![${title(first)}: ${chartAlt(runs)}](${CHARTS}${chartFile(first)})`)
  }
  lines.push(...extras(results, '##', CHARTS))
  const slow = results.slowNotes ?? []
  if (slow.length > 0) lines.push('', '## Cut short', '', ...slow.map((n) => `- ${n}`))
  if (results.unavailable.length > 0) {
    lines.push('', '## Not measured', '')
    for (const u of results.unavailable) lines.push(`- \`${u.series}\`: ${u.error.split('\n')[0]!.replace(/^Error: /, '')}`)
  }
  lines.push('', '## Tails', '', 'p95 / p99 ms per unit of work, from the same samples as the medians.')
  for (const runs of cases) lines.push('', ...tailTable(runs, '###'))
  lines.push('', ...HOW_TO_RUN)
  return lines.join('\n') + '\n'
}

/** What one more ms of latency costs each series (a least-squares slope over latencies): its round trips. */
function roundTrips(results: Results): string[] {
  const fit = (scenario: string, size: number, series: string) => {
    const pts = results.runs.filter((r) => r.scenario === scenario && r.size === size && r.series === series).map((r) => [r.latencyMs, r.medianMs] as const)
    if (pts.length < 2) return undefined
    const mx = pts.reduce((a, p) => a + p[0], 0) / pts.length
    const my = pts.reduce((a, p) => a + p[1], 0) / pts.length
    const slope = pts.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0) / pts.reduce((a, p) => a + (p[0] - mx) ** 2, 0)
    return { slope, intercept: my - slope * mx }
  }
  const cases = SLOPES.filter(([scenario, size]) => results.runs.some((r) => r.scenario === scenario && r.size === size && r.latencyMs > 0))
  if (cases.length === 0) return []
  const series = [...new Set(results.runs.map((r) => r.series))]
  const floor = fit('bulkCreate', 1, 'raw-pipelined')
  return [
    '',
    '## Round trips: what one more millisecond of latency costs',
    '',
    'A least-squares line through each series\' medians against latency. Its slope is what one more millisecond',
    'between the application and the database costs a unit of work: the number of round trips it waits on. Its',
    'intercept is the server\'s and the client\'s own work.',
    '',
    `| ms per ms of latency | ${cases.map(([s, n]) => title({ scenario: s, size: n })).join(' | ')} |`,
    `|---|${cases.map(() => '---:').join('|')}|`,
    ...series.map((s) => `| ${s} | ${cases.map(([sc, n]) => fit(sc, n, s)?.slope.toFixed(1) ?? '–').join(' | ')} |`),
    ...(floor
      ? [
          '',
          `raw-pipelined's intercept for bulkCreate ×1, ${floor.intercept.toFixed(1)} ms, is about what PostgreSQL itself spends on that`,
          'graph on this machine. At low latency that work, not the round trips, takes most of the time, so the ratios',
          'at 0 to 2 ms are far below the ratios of round trips.',
        ]
      : []),
  ]
}

/** The other ORMs the run measured, by name. */
function peerList(results: Results): string {
  const names: Record<string, string> = { 'mikro-orm': 'MikroORM', typeorm: 'TypeORM', prisma: 'Prisma', drizzle: 'Drizzle', joist: 'Joist' }
  const measured = [...new Set(results.runs.map((r) => r.series))].flatMap((s) => (names[s] ? [names[s]] : []))
  if (measured.length === 0) return 'no other ORM'
  return measured.length === 1 ? measured[0]! : `${measured.slice(0, -1).join(', ')} and ${measured.at(-1)}`
}

/** results/latest-<scenario>[-<size>].svg */
function chartFile(r: Pick<Run, 'scenario' | 'size'>): string {
  return `latest-${r.scenario}${r.size ? `-${r.size}` : ''}.svg`
}

function chartAlt(runs: readonly Run[]): string {
  return new Set(runs.map((r) => r.latencyMs)).size > 1 ? 'median ms against latency, one line per series' : 'median ms per series, log scale'
}

/** A line per series against latency, or (a case run at one latency only) a bar per series on a log axis. */
function caseChart(runs: readonly Run[]): string {
  const first = runs[0]!
  const heading = `${title(first)}: ${CHART_TITLES[first.scenario]?.(first.size) ?? 'one unit of work'}`
  if (new Set(runs.map((r) => r.latencyMs)).size > 1) return chart(runs, heading)
  return barChart(`${heading}, ${first.latencyMs} ms latency`, 'median ms per unit of work (log scale)', runs.map((r) => ({ name: r.series, value: r.medianMs })), { log: true, format: ms })
}

const CHART_TITLES: Record<string, (size: number) => string> = {
  bulkCreate: (n) => `${(211 * n).toLocaleString('en')} new rows`,
  coldFlush: () => '211 new rows on a new connection',
  bulkUpdate: () => '50 rows updated in 5 tables',
  mixedFlush: (n) => `insert, update, delete in ${n} table${n === 1 ? '' : 's'}`,
  deleteGraph: () => 'an author and its 160 rows deleted',
  cpuFlush: (n) => `${n.toLocaleString('en')} rows updated`,
  noopFlush: (n) => `${n.toLocaleString('en')} loaded rows, nothing changed`,
  listEndpoint: () => 'a filtered page of 20 books, its count, two levels of relations',
}

/** The peer ORMs' installed versions, from their package.json files. */
async function versions(): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const name of ['@mikro-orm/core', 'typeorm', '@prisma/client', 'drizzle-orm']) {
    try {
      const pkg = JSON.parse(await readFile(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8')) as { version: string }
      out[name] = pkg.version
    } catch {
      out[name] = '(version unknown)'
    }
  }
  return out
}

const HOW_TO_RUN = [
  '## How to run it',
  '',
  'From the repository root, after `pnpm install`. Every run starts its own embedded PostgreSQL and toxiproxy',
  '(or uses `DATABASE_URL` and `TOXIPROXY_URL`), and writes `packages/bench/results/latest.json`, `latest.md` and',
  'its charts (`latest-pooler.*` with `--pooler`). Only a full run, with no flags, also rewrites this page.',
  '',
  '```sh',
  'pnpm bench                  # everything above: every case at 0, 1, 2, 5 and 10 ms, scale, typesScale, throughput, stream memory, phases (about 40 minutes on 2 cores)',
  'pnpm bench --quick          # bulkCreate ×1 and mixedFlush ×10 at 0 and 2 ms (a few minutes)',
  'pnpm bench --scenario listEndpoint                            # the read case alone, at 0, 2 and 10 ms (about 2 minutes)',
  'pnpm bench --latency 2,50 --series flushwave,raw-pipelined --scenario bulkCreate',
  'pnpm bench --scenario scale                                   # 1k, 10k and 100k new rows in one unit of work',
  'pnpm bench --scenario typesScale                              # the same over a column of each newer type (Flushwave, raw SQL)',
  'pnpm bench --scenario throughput --clients 32 --rounds 3 --duration 6   # flushes per second on a pool of 10 at 5 ms, series taking turns',
  'pnpm bench --profile                                          # only the phase profile',
  'pnpm bench --scenario stream                                  # only em.stream\'s memory over a million rows',
  'scripts/patroni-cluster.sh pnpm bench --scenario replicas    # reads over two replicas against the primary, on a Patroni cluster (results/latest-replicas.md)',
  'pnpm bench --quick --pooler                                   # through PgBouncer in transaction mode (when pgbouncer is installed)',
  'pnpm bench --quick --warm-up 0                                # no warm-up: a cold process\'s first flushes',
  'pnpm --filter bench page                                      # this page again, from results/latest.json',
  '```',
  '',
  '`pnpm --filter bench page` rewrites this page and its charts from whatever run wrote `results/latest.json` last:',
  'after a `--quick` run, the page shows the quick run.',
  '',
  'Tools for looking closer at one unit of work, each run with `pnpm --filter bench exec tsx src/<file>`:',
  '',
  '- `client-cpu.ts mixedFlush 10 300 flushwave,raw-pipelined`: client CPU per unit of work, side by side.',
  '- `own-cpu.ts mixedFlush 10 2000`: Flushwave\'s own work with no database, hot, with cold caches, after a minor',
  '  and after a full GC.',
  '- `timeline.ts mixedFlush 10 300 flushwave,raw-pipelined`: when the first and last bytes left, when the answers',
  '  came, and the server\'s CPU.',
  '- `ab.ts mixedFlush 10 300 HEAD`: the working tree against a commit, sample by sample, each side in a V8 isolate',
  '  of its own.',
  '- `steady-ids.ts pooled` and `gc-promotion.ts`: the tail of back-to-back flushes, and what young-generation GCs',
  '  copy. See [steady-state-tail.md](steady-state-tail.md).',
  '- `stream-memory.ts 1000000 postgres,pg,raw`: seeds a million rows (`insert … select generate_series`, untimed),',
  '  then streams them with `em.stream` (batchSize 1,000) in a fresh process per driver and prints the RSS at the',
  `  start, its peak and their difference (the goal: within 64 MB), heapUsed, the rows seen and the time.`,
  '  `STREAM_TRACE=1` prints RSS and heapUsed every 100,000 rows.',
  '- `profile.ts flushwave listEndpoint 0 2000` (under `node --import tsx --cpu-prof`): one series\' unit of work in',
  '  a loop, straight to the database, to profile.',
]

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const results = JSON.parse(await readFile(new URL('latest.json', RESULTS), 'utf8')) as Results
  await writeBenchmarksPage(results)
}
