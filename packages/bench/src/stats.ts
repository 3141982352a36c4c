/** Quantiles and ratio spreads of timing samples. */

/** Linear interpolation between the closest ranks; `sorted` ascending, non-empty. */
export function quantile(sorted: readonly number[], q: number): number {
  const i = (sorted.length - 1) * q
  const lo = Math.floor(i)
  const hi = Math.ceil(i)
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (i - lo)
}

export function sortedCopy(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b)
}

export function median(values: readonly number[]): number {
  return quantile(sortedCopy(values), 0.5)
}

/**
 * A series against the base in the same cell, from per-round ratios (its sample of round r ÷ the
 * base's sample of round r): their median, and their interquartile range. The rounds are
 * interleaved, so a slow moment of the machine lands on both sides of a per-round ratio. With one
 * round (a series too slow to sample more than once), the ratio of that run to the base's median.
 */
export interface Ratio {
  readonly median: number
  /** 25th and 75th percentiles of the per-round ratios. */
  readonly q1: number
  readonly q3: number
}

export function ratio(samples: readonly number[], base: readonly number[]): Ratio {
  if (samples.length < 2) {
    const m = median(samples) / median(base)
    return { median: m, q1: m, q3: m }
  }
  const rounds = Math.min(samples.length, base.length)
  const perRound = sortedCopy(Array.from({ length: rounds }, (_, r) => samples[r]! / base[r]!))
  return { median: quantile(perRound, 0.5), q1: quantile(perRound, 0.25), q3: quantile(perRound, 0.75) }
}

export const round2 = (ms: number) => Math.round(ms * 100) / 100
