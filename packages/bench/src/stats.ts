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
 * A series against the base in the same cell. `median`: the median of all pairwise ratios (every
 * sample of the series ÷ every sample of the base; a Hodges–Lehmann estimate of the ratio), which
 * moves less between runs than the ratio of two medians or the median of per-round ratios when a
 * shared machine adds heavy-tailed noise to single samples. `q1`–`q3`: the interquartile range of
 * the per-round ratios (sample of round r ÷ the base's sample of round r), i.e. how far apart the
 * two land in one round. With one run (a series too slow to sample twice), that run ÷ the base's median.
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
  const pairwise = sortedCopy(samples.flatMap((s) => base.map((b) => s / b)))
  return { median: quantile(pairwise, 0.5), q1: quantile(perRound, 0.25), q3: quantile(perRound, 0.75) }
}

export const round2 = (ms: number) => Math.round(ms * 100) / 100
