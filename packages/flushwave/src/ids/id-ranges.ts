import type { IdBlock } from '../sql/render-ids.js'

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/** Consecutive sequence values `[start, end)`. Sequences are int8: bigint keeps every value exact. */
interface Range {
  start: bigint
  end: bigint
}

/**
 * The spare ids of one table, held as ranges rather than strings: a block of 65,536 fetched ids is
 * usually one range. Ids given back by a rolled-back flush are handed out first. Taking `n` ids
 * costs O(n + ranges consumed); giving back costs O(ids given); nothing copies the whole store.
 */
export class IdRanges {
  /** Fetched ranges, oldest first; `head` skips the used ones without shifting the array. */
  private fetched: Range[] = []
  private head = 0
  /** Given-back ranges, used last-in first-out. */
  private readonly returned: Range[] = []
  private count = 0

  get size(): number {
    return this.count
  }

  /** Adds a fetched block. */
  add(block: IdBlock): void {
    if (block.count === 0) return
    if (block.starts === undefined) this.fetched.push({ start: block.first, end: block.first + BigInt(block.count) })
    else for (const range of toRanges(block.starts, BigInt(block.step))) this.fetched.push(range)
    this.count += block.count
  }

  /** Puts back ids that were never committed, to be taken before any fetched one. */
  giveBack(ids: readonly string[]): void {
    // Reversed, so that taking from the end of `returned` hands them out in their given order.
    this.returned.push(...toRanges(ids, 1n).reverse())
    this.count += ids.length
  }

  /** Takes `n` ids (the caller checked `size`), as text. */
  take(n: number): string[] {
    if (n > this.count) throw new RangeError(`only ${this.count} ids left, ${n} asked`)
    const out = new Array<string>(n)
    let filled = 0
    while (filled < n) {
      const range = this.returned.length > 0 ? this.returned[this.returned.length - 1]! : this.fetched[this.head]!
      const k = Math.min(n - filled, Number(range.end - range.start))
      if (range.end <= MAX_SAFE) {
        // Every bigint ++ allocates: counting in a number is faster (docs/design-notes.md,
        // "Ids counted in numbers").
        const first = Number(range.start)
        for (let i = 0; i < k; i++) out[filled++] = String(first + i)
      } else for (let i = 0n; i < BigInt(k); i++) out[filled++] = String(range.start + i)
      range.start += BigInt(k)
      if (range.start === range.end) this.dropEmpty(range)
    }
    this.count -= n
    return out
  }

  /** Takes one id (the caller checked `size`): take(1) without the array. */
  takeOne(): string {
    if (this.count === 0) throw new RangeError('no ids left')
    const range = this.returned.length > 0 ? this.returned[this.returned.length - 1]! : this.fetched[this.head]!
    const id = String(range.start++)
    if (range.start === range.end) this.dropEmpty(range)
    this.count--
    return id
  }

  private dropEmpty(range: Range): void {
    if (this.returned.length > 0 && this.returned[this.returned.length - 1] === range) {
      this.returned.pop()
      return
    }
    this.head++
    // Compact once the used prefix dominates, so the array does not grow without bound.
    if (this.head > 32 && this.head * 2 > this.fetched.length) {
      this.fetched = this.fetched.slice(this.head)
      this.head = 0
    }
  }
}

/** Runs of `step` ids from each start, merged where one run ends where the next begins. */
function toRanges(starts: readonly string[], step: bigint): Range[] {
  const ranges: Range[] = []
  let last: Range | undefined
  for (const text of starts) {
    const value = BigInt(text)
    if (last !== undefined && last.end === value) {
      last.end = value + step
    } else {
      last = { start: value, end: value + step }
      ranges.push(last)
    }
  }
  return ranges
}
