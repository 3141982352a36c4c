/** Shared pieces of the bench's SVG charts. */

export const COLORS = ['#d62728', '#ff7f0e', '#2ca02c', '#7f7f7f', '#1f77b4', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22']

export const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;')

export function svgOpen(width: number, height: number, title: string, left: number): string[] {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${left}" y="24" font-size="15" font-weight="600">${escape(title)}</text>`,
  ]
}

/** Decades spanning [min, max] on a log axis: the powers of ten to label. */
export function decades(min: number, max: number): number[] {
  const lo = Math.floor(Math.log10(Math.max(min, 1e-6)))
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(max, 1e-6))))
  return Array.from({ length: hi - lo + 1 }, (_, i) => 10 ** (lo + i))
}

/** 1, 10, 100, 1000, 10k, 100k: short labels for powers of ten and round numbers. */
export function tick(v: number): string {
  if (v >= 1000 && v % 1000 === 0) return `${v / 1000}k`
  return v >= 1 ? String(Math.round(v)) : String(Number(v.toPrecision(1)))
}

/** Maps v onto [from, to] on a log scale between the first and last decade. */
export function logScale(ticks: readonly number[], from: number, to: number): (v: number) => number {
  const lo = Math.log10(ticks[0]!)
  const hi = Math.log10(ticks[ticks.length - 1]!)
  return (v) => px(from + ((Math.log10(Math.max(v, ticks[0]!)) - lo) / (hi - lo)) * (to - from))
}

/** Tenths of a pixel: enough for a chart, and short files. */
export const px = (v: number) => Math.round(v * 10) / 10
