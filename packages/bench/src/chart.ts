import type { Run } from './runner.js'

const W = 760
const H = 440
const M = { left: 64, right: 170, top: 44, bottom: 52 }
const COLORS = ['#d62728', '#ff7f0e', '#2ca02c', '#7f7f7f', '#1f77b4', '#9467bd', '#8c564b', '#e377c2', '#17becf']

/** Time against latency, one line per series, for one scenario: readable without the table. */
export function chart(runs: readonly Run[], title: string): string {
  const latencies = [...new Set(runs.map((r) => r.latencyMs))].sort((a, b) => a - b)
  const series = [...new Set(runs.map((r) => r.series))]
  const maxY = niceMax(Math.max(...runs.map((r) => r.medianMs)))
  const maxX = Math.max(...latencies, 1)
  const x = (l: number) => M.left + (l / maxX) * (W - M.left - M.right)
  const y = (ms: number) => H - M.bottom - (ms / maxY) * (H - M.top - M.bottom)
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${M.left}" y="24" font-size="15" font-weight="600">${escape(title)}</text>`,
  ]
  for (let i = 0; i <= 5; i++) {
    const v = (maxY / 5) * i
    out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${y(v)}" y2="${y(v)}" stroke="#e5e5e5"/>`)
    out.push(`<text x="${M.left - 8}" y="${y(v) + 4}" text-anchor="end" fill="#555">${fmt(v)}</text>`)
  }
  for (const l of latencies) {
    out.push(`<line x1="${x(l)}" x2="${x(l)}" y1="${M.top}" y2="${H - M.bottom}" stroke="#f0f0f0"/>`)
    out.push(`<text x="${x(l)}" y="${H - M.bottom + 18}" text-anchor="middle" fill="#555">${l}</text>`)
  }
  out.push(`<text x="${(M.left + W - M.right) / 2}" y="${H - 12}" text-anchor="middle">latency, ms (server → client)</text>`)
  out.push(`<text transform="translate(16 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">median ms per unit of work</text>`)
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!
    const points = latencies.flatMap((l) => {
      const r = runs.find((run) => run.series === s && run.latencyMs === l)
      return r ? [[x(l), y(r.medianMs)] as const] : []
    })
    const width = s === 'flushwave' ? 3 : 1.6
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="${width}" points="${points.map((p) => p.join(',')).join(' ')}"/>`)
    for (const [px, py] of points) out.push(`<circle cx="${px}" cy="${py}" r="${width + 0.6}" fill="${color}"/>`)
    const ly = M.top + 8 + i * 20
    out.push(`<line x1="${W - M.right + 16}" x2="${W - M.right + 40}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="${width}"/>`)
    out.push(`<text x="${W - M.right + 46}" y="${ly + 4}">${escape(s)}</text>`)
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}

function niceMax(v: number): number {
  const p = 10 ** Math.floor(Math.log10(v || 1))
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((n) => n >= v) ?? v
}

const fmt = (v: number) => (v >= 10 ? v.toFixed(0) : v.toFixed(1))
const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;')
