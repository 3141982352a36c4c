import { describe, expect, it } from 'vitest'
import { withoutLeadingHoles } from '../../src/drivers/postgres-js/sparse-rows.js'

describe('withoutLeadingHoles', () => {
  it('moves rows placed after leading holes to the front, in order', () => {
    const rows: unknown[][] = []
    rows[3] = [1]
    rows[4] = [2]
    expect(withoutLeadingHoles(rows)).toEqual([[1], [2]])
  })
  it('returns dense results, empty or not, as they are', () => {
    const dense = [[1], [2]]
    expect(withoutLeadingHoles(dense)).toBe(dense)
    const empty: unknown[] = []
    expect(withoutLeadingHoles(empty)).toBe(empty)
  })
  it('keeps a null first value: only a missing row is a hole', () => {
    const rows = [null, [2]]
    expect(withoutLeadingHoles(rows)).toBe(rows)
  })
})
