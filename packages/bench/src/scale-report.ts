import { lineChart } from './chart.js'
import type { Run } from './runner.js'

/** scale runs as µs per row: a table (series × rows) and a chart on log axes. */
const usPerRow = (r: Run) => (r.medianMs * 1000) / r.size

export function scaleTable(runs: readonly Run[]): string {
  const sizes = [...new Set(runs.map((r) => r.size))].sort((a, b) => a - b)
  const series = [...new Set(runs.map((r) => r.series))]
  const lines = [`| series | ${sizes.map((s) => `${s.toLocaleString('en')} rows`).join(' | ')} |`, `|---|${sizes.map(() => '---:').join('|')}|`]
  for (const s of series) {
    const row = sizes.map((size) => {
      const r = runs.find((x) => x.series === s && x.size === size)
      return r ? `${usPerRow(r).toFixed(1)}${r.samples === 1 ? ' (1 run)' : ''}` : '–'
    })
    lines.push(`| ${s} | ${row.join(' | ')} |`)
  }
  return lines.join('\n')
}

export function scaleChart(runs: readonly Run[]): string {
  const series = [...new Set(runs.map((r) => r.series))]
  return lineChart({
    title: 'scale: N new rows in one unit of work, 0 ms latency',
    xLabel: 'rows in the unit of work (log scale)',
    yLabel: 'µs per row (log scale)',
    xLog: true,
    lines: series.map((s) => ({
      name: s,
      bold: s === 'flushwave',
      points: runs.filter((r) => r.series === s).sort((a, b) => a.size - b.size).map((r) => [r.size, usPerRow(r)] as const),
    })),
  })
}
