import { IdRanges } from './id-ranges.js'

/**
 * A fetch never asks for more spare ids than this per table. Spare blocks follow demand (twice the
 * ids taken between fetches), so only a workload that takes this many between refills keeps it.
 */
const MAX_SPARE = 65_536

/**
 * With a plain sequence (increment 1) the server runs one nextval per id: a background refill of
 * thousands holds a connection, and with a pool of one the next flush waits behind it (blocks that
 * kept doubling made a steady loop of flushes' p99 several times its median). So a plain sequence's
 * spare block stops at this, or at twice the largest take when flushes are bigger than that (a
 * refill then costs the server about what such a flush does). Pooled sequences (increment > 1)
 * reserve a block with each nextval, so theirs grow to MAX_SPARE (docs/design-notes.md,
 * "Plain-sequence spare blocks").
 */
const MAX_PLAIN_SPARE = 2_048

/** One table's spare ids, and the demand that sizes its next fetch and says when to refill. */
export class TableIds {
  readonly ranges = new IdRanges()
  /** Ids taken since this table's last fetch: the demand that sizes its next spare block. */
  takenSinceFetch = 0
  /** The spare ids its last fetch aimed to hold: below half of it, the pool refills in the background. */
  lastSpare = 0
  /**
   * The most ids one take has asked for since the last fetch. The pool also refills below one and a
   * half of it, so that the next flush as big as the last finds its ids ready however big it is.
   */
  largestTake = 0
  /** Whether the last fetch found a pooled sequence (increment > 1): blocks cost O(1), not O(ids). */
  pooled = false
  /**
   * The ids taken since `flowSince` (performance.now()): the rate they go at. It counts from the
   * last background refill's request, or from the last time waiting flushes were served: those
   * waited, so they took nothing meanwhile, and a burst served at once is no rate.
   */
  flowTaken = 0
  flowSince = 0

  /** `count` ids were taken in one take. */
  took(count: number): void {
    this.takenSinceFetch += count
    this.flowTaken += count
    if (count > this.largestTake) this.largestTake = count
  }

  /** A fetch with a spare block of `spare` is asked for: demand counts afresh from `now`. */
  asked(spare: number, now: number): void {
    this.takenSinceFetch = 0
    this.lastSpare = spare
    this.largestTake = 0
    this.restartFlow(now)
  }

  /** The rate ids go at counts afresh from `now` (see flowTaken). */
  restartFlow(now: number): void {
    this.flowTaken = 0
    this.flowSince = now
  }

  /**
   * Twice the ids this table would use while a fetch of `fetchMs` is in flight, at the rate it has
   * used them lately, over at least a millisecond.
   */
  inFlightNeed(fetchMs: number, now: number): number {
    if (fetchMs === 0 || this.flowTaken === 0) return 0
    return (2 * this.flowTaken * fetchMs) / Math.max(now - this.flowSince, 1)
  }

  /**
   * The spare block its next fetch asks for: twice the ids taken since its last fetch, and twice
   * what it would use while two fetches are in flight (so that a block outlasts the refill that
   * follows it); at least `blockSize`, at most its cap (see MAX_PLAIN_SPARE).
   */
  spare(blockSize: number, fetchMs: number, now: number): number {
    const cap = this.pooled ? MAX_SPARE : Math.min(MAX_SPARE, Math.max(MAX_PLAIN_SPARE, 2 * this.largestTake))
    return Math.min(cap, Math.max(blockSize, 2 * this.takenSinceFetch, Math.ceil(2 * this.inFlightNeed(fetchMs, now))))
  }

  /**
   * Below its low-water mark, the largest of: half its last spare block; one and a half times the
   * largest take since its last fetch (a flush of 10,000 new rows must find the next 10,000 ready,
   * whatever half a block is); and twice what it uses while a fetch is in flight (without that,
   * flushes that came faster than a fetch ran dry in the middle of the first refill:
   * docs/design-notes.md, "A low-water mark that outlasts a fetch").
   */
  low(fetchMs: number, now: number): boolean {
    return this.lastSpare > 0 && this.ranges.size < Math.max(this.lastSpare / 2, 1.5 * this.largestTake, this.inFlightNeed(fetchMs, now))
  }
}
