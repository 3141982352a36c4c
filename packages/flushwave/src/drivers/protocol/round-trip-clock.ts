/** What a round trip is taken to cost before the executor has timed one (ms). */
const ASSUMED_ROUND_TRIP_MS = 5

/**
 * An executor's idea of one round trip's time, for the COPY cost model (plan/copy-policy.ts): the
 * quickest one-round-trip exchange it saw lately (a read, a flush's pipeline). Each new sample
 * weighs the old minimum 2% heavier first, so a network that became slower is noticed within a few
 * dozen exchanges. It includes the server's time of that exchange: an upper bound, which only makes
 * COPY a little rarer where it would cost a round trip.
 */
export class RoundTripClock {
  private quickest = Infinity

  note(ms: number): void {
    this.quickest = Math.min(ms, this.quickest * 1.02)
  }

  get ms(): number {
    return this.quickest === Infinity ? ASSUMED_ROUND_TRIP_MS : this.quickest
  }
}
