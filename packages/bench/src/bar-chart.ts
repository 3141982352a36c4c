import { COLORS, decades, escape, logScale, px, svgOpen, tick } from './svg.js'

const W = 760
const M = { left: 130, right: 90, top: 44, bottom: 40 }
const BAR = 22

export interface BarChartOptions {
  /** A log axis, with a line at every power of ten: for values a thousand times apart (noopFlush). */
  readonly log?: boolean
  /** The value printed at the end of each bar (default: no decimals). */
  readonly format?: (value: number) => string
}

/** Horizontal bars, one per series, the value printed at the end of each (throughput, 0 ms cases). */
export function barChart(title: string, unit: string, bars: readonly { name: string; value: number }[], options: BarChartOptions = {}): string {
  const H = M.top + M.bottom + bars.length * (BAR + 8)
  const format = options.format ?? ((v: number) => v.toFixed(0))
  const max = Math.max(...bars.map((b) => b.value), 1)
  // A decade below the smallest value, so that the shortest bar still shows.
  const ticks = options.log ? decades(Math.min(...bars.map((b) => b.value)) / 10, max) : []
  const x = options.log ? logScale(ticks, M.left, W - M.right) : (v: number) => px(M.left + (v / max) * (W - M.left - M.right))
  const out = svgOpen(W, H, title, 16)
  for (const v of ticks) {
    out.push(`<line x1="${x(v)}" x2="${x(v)}" y1="${M.top - 6}" y2="${H - M.bottom}" stroke="#e0e0e0"/>`)
    out.push(`<text x="${x(v)}" y="${H - M.bottom + 14}" text-anchor="middle" fill="#555">${tick(v)}</text>`)
  }
  bars.forEach((b, i) => {
    const y = M.top + i * (BAR + 8)
    const color = b.name === 'flushwave' ? COLORS[0]! : COLORS[(i % (COLORS.length - 1)) + 1]!
    out.push(`<text x="${M.left - 8}" y="${y + BAR / 2 + 4}" text-anchor="end">${escape(b.name)}</text>`)
    out.push(`<rect x="${M.left}" y="${y}" width="${Math.max(1, x(b.value) - M.left)}" height="${BAR}" fill="${color}"/>`)
    out.push(`<text x="${x(b.value) + 6}" y="${y + BAR / 2 + 4}" fill="#333">${escape(format(b.value))}</text>`)
  })
  out.push(`<text x="${(M.left + W - M.right) / 2}" y="${H - 12}" text-anchor="middle">${escape(unit)}</text>`)
  out.push('</svg>')
  return out.join('\n') + '\n'
}
