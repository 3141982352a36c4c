import { COLORS, escape, px, svgOpen } from './svg.js'

const W = 760
const M = { left: 130, right: 90, top: 44, bottom: 40 }
const BAR = 22

/** Horizontal bars, one per series, the value printed at the end of each (throughput). */
export function barChart(title: string, unit: string, bars: readonly { name: string; value: number }[]): string {
  const H = M.top + M.bottom + bars.length * (BAR + 8)
  const max = Math.max(...bars.map((b) => b.value), 1)
  const x = (v: number) => px(M.left + (v / max) * (W - M.left - M.right))
  const out = svgOpen(W, H, title, 16)
  bars.forEach((b, i) => {
    const y = M.top + i * (BAR + 8)
    const color = b.name === 'flushwave' ? COLORS[0]! : COLORS[(i % (COLORS.length - 1)) + 1]!
    out.push(`<text x="${M.left - 8}" y="${y + BAR / 2 + 4}" text-anchor="end">${escape(b.name)}</text>`)
    out.push(`<rect x="${M.left}" y="${y}" width="${Math.max(1, x(b.value) - M.left)}" height="${BAR}" fill="${color}"/>`)
    out.push(`<text x="${x(b.value) + 6}" y="${y + BAR / 2 + 4}" fill="#333">${b.value.toFixed(0)}</text>`)
  })
  out.push(`<text x="${(M.left + W - M.right) / 2}" y="${H - 12}" text-anchor="middle">${escape(unit)}</text>`)
  out.push('</svg>')
  return out.join('\n') + '\n'
}
