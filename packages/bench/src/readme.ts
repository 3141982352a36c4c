/**
 * Puts the results into the repository README, between `<!-- bench:start -->` and
 * `<!-- bench:end -->`. `pnpm bench` does it after a full default run; by hand, from the last
 * results: `pnpm --filter bench exec tsx src/readme.ts`.
 */
import { readFile, writeFile } from 'node:fs/promises'
import { pathToFileURL } from 'node:url'
import { markdown, ratioText, type Results } from './report.js'

const README = new URL('../../../README.md', import.meta.url)
const START = '<!-- bench:start -->'
const END = '<!-- bench:end -->'

export async function updateReadme(results: Results): Promise<void> {
  const text = await readFile(README, 'utf8')
  const from = text.indexOf(START)
  const to = text.indexOf(END)
  if (from < 0 || to < from) throw new Error(`README.md has no ${START} … ${END} block`)
  const body = markdown(results, { tails: false, charts: 'packages/bench/results/' }).replace(/^# Flushwave benchmark\n\n/, '').replace(/^## /gm, '#### ') + analysis(results)
  await writeFile(README, `${text.slice(0, from + START.length)}\n${body}\n${text.slice(to)}`)
  process.stderr.write('updated the benchmark section of README.md\n')
}

/** What one more ms of latency costs each series (a least-squares slope over latencies), and the 2 ms ratios. */
export function analysis(results: Results): string {
  const cases = [['bulkCreate', 1, 'bulkCreate×1'], ['bulkUpdate', 0, 'bulkUpdate'], ['mixedFlush', 10, 'mixedFlush×10'], ['deleteGraph', 0, 'deleteGraph']] as const
  const fit = (scenario: string, size: number, series: string) => {
    const pts = results.runs.filter((r) => r.scenario === scenario && r.size === size && r.series === series).map((r) => [r.latencyMs, r.medianMs] as const)
    if (pts.length < 2) return undefined
    const mx = pts.reduce((a, p) => a + p[0], 0) / pts.length
    const my = pts.reduce((a, p) => a + p[1], 0) / pts.length
    const slope = pts.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0) / pts.reduce((a, p) => a + (p[0] - mx) ** 2, 0)
    return { slope, intercept: my - slope * mx }
  }
  const series = [...new Set(results.runs.map((r) => r.series))]
  const rows = series.map((s) => `| ${s} | ${cases.map(([sc, size]) => fit(sc, size, s)?.slope.toFixed(1) ?? '–').join(' | ')} |`)
  const at2 = results.runs.filter((r) => r.scenario === 'bulkCreate' && r.size === 1 && r.latencyMs === 2)
  const fw = at2.find((r) => r.series === 'flushwave')?.medianMs
  const ratios = at2.filter((r) => r.series !== 'flushwave').map((r) => `${r.series} ${r.medianMs.toFixed(1)}${ratioText(r)}`).join(', ')
  const floor = fit('bulkCreate', 1, 'raw-pipelined')
  return `
Reading the numbers: the machine is shared and noisy, so single cells jump; compare rows within a
column, and prefer slopes. A least-squares line through each series' medians against latency gives
what one more millisecond of latency costs a unit of work, i.e. the round trips it waits on; the
intercept is the server's and the client's own work:

| ms per ms of latency | ${cases.map((c) => c[2]).join(' | ')} |
|---|${cases.map(() => '---:').join('|')}|
${rows.join('\n')}

Flushwave pays one round trip whatever the unit of work; \`flushwave-begin\` three; the others one per
statement or more. But the 211-row graph of bulkCreate×1 also costs PostgreSQL itself real time on
this 2-core machine (raw-pipelined's intercept: ${floor?.intercept.toFixed(0) ?? '?'} ms), so at 2 ms
the ratios are far below the round-trip ratios: flushwave ${fw?.toFixed(1) ?? '?'} ms against ${ratios}.
${clientWork(results)}Flushwave writes the two timestamp columns the others leave to the database default.
`
}

/** Flushwave's own client work for bulkCreate ×1, from the phase profile when the run has one. */
function clientWork(results: Results): string {
  const p = results.phases?.find((r) => r.unit === 'bulkCreate ×1')?.medians
  if (!p) return ''
  const cpu = p.create + p.checks + p.changes + p.plan + p.render + p.record
  return `Flushwave's own client work for that graph (phase profile above): ${cpu.toFixed(1)} ms, of which create ${p.create.toFixed(1)} ms.\n`
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const results = JSON.parse(await readFile(new URL('../results/latest.json', import.meta.url), 'utf8')) as Results
  await updateReadme(results)
}
