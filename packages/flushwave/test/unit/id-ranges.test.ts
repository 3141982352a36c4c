import { describe, expect, it } from 'vitest'
import { IdRanges } from '../../src/ids/id-ranges.js'

const seq = (from: number, n: number) => Array.from({ length: n }, (_, i) => String(from + i))

describe('IdRanges', () => {
  it('hands out fetched ids in order across gaps, each once', () => {
    const r = new IdRanges()
    r.add({ first: 1n, count: 3, step: 1 })
    r.add({ first: 0n, count: 3, step: 1, starts: seq(10, 3) })
    expect(r.size).toBe(6)
    expect(r.take(4)).toEqual(['1', '2', '3', '10'])
    expect(r.take(2)).toEqual(['11', '12'])
    expect(r.size).toBe(0)
    expect(() => r.take(1)).toThrow(RangeError)
  })

  it('hands out given-back ids first, in the order given', () => {
    const r = new IdRanges()
    r.add({ first: 100n, count: 5, step: 1 })
    r.giveBack(['7', '8', '42'])
    expect(r.take(4)).toEqual(['7', '8', '42', '100'])
    expect(r.size).toBe(4)
  })

  it('expands the runs of a pooled sequence, merging adjacent ones', () => {
    const r = new IdRanges()
    // increment by 100: nextval gave 1, 101 (adjacent) and 501 (after another session's block).
    r.add({ first: 1n, count: 300, step: 100, starts: ['1', '101', '501'] })
    expect(r.size).toBe(300)
    const ids = r.take(300)
    expect(ids.slice(198, 202)).toEqual(['199', '200', '501', '502'])
    expect(ids.at(-1)).toBe('600')
  })

  it('keeps int8 values beyond 2^53 exact', () => {
    const r = new IdRanges()
    r.add({ first: 9007199254740993n, count: 2, step: 1 })
    expect(r.take(2)).toEqual(['9007199254740993', '9007199254740994'])
  })

  it('stays correct over many small takes (the used prefix is compacted)', () => {
    const r = new IdRanges()
    // 1,000 ranges of two ids each: every take crosses into a new range.
    const list = Array.from({ length: 1_000 }, (_, i) => [String(i * 10), String(i * 10 + 1)]).flat()
    r.add({ first: 0n, count: list.length, step: 1, starts: list })
    const out: string[] = []
    for (let i = 0; i < 500; i++) out.push(...r.take(4))
    expect(out).toHaveLength(2_000)
    expect(new Set(out).size).toBe(2_000)
    expect(out.at(-1)).toBe('9991')
  })
})
