import type { Run } from './runner.js'
import { COLORS, decades, escape, logScale, px, svgOpen, tick } from './svg.js'

const W = 760
const H = 440
const M = { left: 64, right: 170, top: 44, bottom: 52 }

export interface Line {
  readonly name: string
  readonly points: readonly (readonly [number, number])[]
  /** Drawn thicker (flushwave). */
  readonly bold?: boolean
}

export interface LineChart {
  readonly title: string
  readonly xLabel: string
  readonly yLabel: string
  /** A log x axis (rows), else linear from 0 (latency). */
  readonly xLog: boolean
  readonly lines: readonly Line[]
}

/**
 * Lines on a log y axis: series a hundred times apart (Prisma and the rest) stay readable, and equal
 * ratios look equally far apart at every height. Ticks at every power of ten, faint lines at 2 and 5.
 */
export function lineChart(c: LineChart): string {
  const all = c.lines.flatMap((l) => l.points)
  const yTicks = decades(Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1])))
  const y = logScale(yTicks, H - M.bottom, M.top)
  const xs = [...new Set(all.map((p) => p[0]))].sort((a, b) => a - b)
  const xTicks = c.xLog ? decades(xs[0]!, xs[xs.length - 1]!) : xs
  const maxX = Math.max(...xs, 1)
  const x = c.xLog ? logScale(xTicks, M.left, W - M.right) : (v: number) => px(M.left + (v / maxX) * (W - M.left - M.right))
  const out = svgOpen(W, H, c.title, M.left)
  for (const [i, v] of yTicks.entries()) {
    out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${y(v)}" y2="${y(v)}" stroke="#d9d9d9"/>`)
    out.push(`<text x="${M.left - 8}" y="${y(v) + 4}" text-anchor="end" fill="#555">${tick(v)}</text>`)
    if (i < yTicks.length - 1) for (const m of [2, 5]) out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${y(v * m)}" y2="${y(v * m)}" stroke="#f2f2f2"/>`)
  }
  for (const v of xTicks) {
    out.push(`<line x1="${x(v)}" x2="${x(v)}" y1="${M.top}" y2="${H - M.bottom}" stroke="#f0f0f0"/>`)
    out.push(`<text x="${x(v)}" y="${H - M.bottom + 18}" text-anchor="middle" fill="#555">${tick(v)}</text>`)
  }
  out.push(`<text x="${(M.left + W - M.right) / 2}" y="${H - 12}" text-anchor="middle">${escape(c.xLabel)}</text>`)
  out.push(`<text transform="translate(16 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">${escape(c.yLabel)}</text>`)
  c.lines.forEach((line, i) => {
    const color = COLORS[i % COLORS.length]!
    const points = line.points.map(([px, py]) => [x(px), y(py)] as const)
    const width = line.bold ? 3 : 1.6
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="${width}" points="${points.map((p) => p.join(',')).join(' ')}"/>`)
    for (const [px, py] of points) out.push(`<circle cx="${px}" cy="${py}" r="${width + 0.6}" fill="${color}"/>`)
    const ly = M.top + 8 + i * 20
    out.push(`<line x1="${W - M.right + 16}" x2="${W - M.right + 40}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="${width}"/>`)
    out.push(`<text x="${W - M.right + 46}" y="${ly + 4}">${escape(line.name)}</text>`)
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}

/** Median ms against latency, one line per series, for one scenario. */
export function chart(runs: readonly Run[], title: string): string {
  const series = [...new Set(runs.map((r) => r.series))]
  return lineChart({
    title,
    xLabel: 'latency, ms (server → client)',
    yLabel: 'median ms per unit of work (log scale)',
    xLog: false,
    lines: series.map((s) => ({
      name: s,
      bold: s === 'flushwave',
      points: runs.filter((r) => r.series === s).sort((a, b) => a.latencyMs - b.latencyMs).map((r) => [r.latencyMs, r.medianMs] as const),
    })),
  })
}
