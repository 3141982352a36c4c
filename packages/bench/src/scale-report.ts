import { lineChart } from './chart.js'
import { BASE, type Run } from './runner.js'
import { ratio } from './stats.js'

/** scale and typesScale runs as µs per row: a table (series × rows) and a chart on log axes. */
const usPerRow = (r: Run) => (r.medianMs * 1000) / r.size

/** The scenarios reported as µs per row (scale's table and chart), not as cells against latency. */
export const isScale = (scenario: string): boolean => scenario === 'scale' || scenario === 'typesScale'

export const TYPES_SCALE_TITLE = 'typesScale: N new rows of every newer column type in one unit of work, 0 ms latency'

/** µs per row, then (as in the cell tables) the ratio to flushwave and its interquartile range. */
export function scaleTable(runs: readonly Run[]): string {
  const sizes = [...new Set(runs.map((r) => r.size))].sort((a, b) => a - b)
  const series = [...new Set(runs.map((r) => r.series))]
  const lines = [`| series | ${sizes.map((s) => `${s.toLocaleString('en')} rows`).join(' | ')} |`, `|---|${sizes.map(() => '---:').join('|')}|`]
  for (const s of series) {
    const row = sizes.map((size) => {
      const r = runs.find((x) => x.series === s && x.size === size)
      if (!r) return '–'
      const q = r.ratio && r.series !== BASE ? ` · ${r.ratio.median.toFixed(2)}×${r.samples > 1 ? ` (${r.ratio.q1.toFixed(2)}–${r.ratio.q3.toFixed(2)})` : ''}` : ''
      return `${usPerRow(r).toFixed(1)}${q}${r.samples === 1 ? ' (1 run)' : ''}`
    })
    lines.push(`| ${s} | ${row.join(' | ')} |`)
  }
  return lines.join('\n')
}

/**
 * flushwave ÷ `against` per size, the other way round from the table's ratios (the median of all
 * pairwise ratios of the two series' samples): how many times the hand-written insert's time
 * Flushwave takes.
 */
export function timesAgainst(runs: readonly Run[], against: string): string | undefined {
  const parts: string[] = []
  for (const size of [...new Set(runs.map((r) => r.size))].sort((a, b) => a - b)) {
    const fw = runs.find((r) => r.series === BASE && r.size === size)
    const other = runs.find((r) => r.series === against && r.size === size)
    if (!fw || !other) continue
    const r = ratio(fw.samplesMs, other.samplesMs)
    parts.push(`${r.median.toFixed(2)}× (${r.q1.toFixed(2)}–${r.q3.toFixed(2)}) at ${size.toLocaleString('en')} rows`)
  }
  return parts.length > 0 ? `${BASE} ÷ ${against}: ${parts.join(', ')}.` : undefined
}

export function scaleChart(runs: readonly Run[], title = 'scale: N new rows in one unit of work, 0 ms latency'): string {
  const series = [...new Set(runs.map((r) => r.series))]
  return lineChart({
    title,
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
