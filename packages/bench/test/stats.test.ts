import { describe, expect, it } from 'vitest'
import { quantile, ratio } from '../src/stats.js'

describe('stats', () => {
  it('interpolates quantiles between the closest ranks', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5)
    expect(quantile([1, 2, 3, 4], 0)).toBe(1)
    expect(quantile([1, 2, 3, 4], 1)).toBe(4)
    expect(quantile([10, 20, 30, 40, 50], 0.25)).toBe(20)
  })

  it('gives a ratio as the median of all pairwise ratios, with the spread of the per-round ones', () => {
    // Round by round 0.5, 1 and 0.5; of all nine pairs, six are 0.5 and three are 1.
    const r = ratio([1, 2, 1], [2, 2, 2])
    expect(r.median).toBeCloseTo(0.5)
    expect(r.q1).toBeCloseTo(0.5)
    expect(r.q3).toBeCloseTo(0.75)
    // One outlier sample moves the ratio of means far more than this estimate.
    expect(ratio([1, 1, 1, 1, 100], [1, 1, 1, 1, 1]).median).toBe(1)
  })

  it('divides the medians when a series ran once', () => {
    expect(ratio([6], [1, 2, 3])).toEqual({ median: 3, q1: 3, q3: 3 })
  })
})
