/**
 * Where a flush's time went, in milliseconds. Every phase but `ids` and `write` is client CPU;
 * `ids` and `write` include waiting on the server. A phase that did not run is 0.
 */
export interface FlushPhases {
  /** Hooks, validation rules and in-place-change checks (EntityManager.flush). */
  checks: number
  /** Taking ids from the pool, with the fetch when it ran short. */
  ids: number
  /** Diffing entities against their snapshots into row changes. */
  changes: number
  /** Ordering and batching the changes into ops. */
  plan: number
  /** Rendering the ops to SQL text and bind parameters (a COPY's rows render during `write`, as they are sent). */
  render: number
  /** The executor: encoding (a COPY's rows too), the round trip, the server's work, reading the answers. */
  write: number
  /** Recording ids, statuses and snapshots after COMMIT. */
  record: number
}

/** Laps of performance.now(): a handful of calls per flush. */
export class PhaseClock {
  readonly phases: FlushPhases
  private readonly started = performance.now()
  private last = this.started

  /**
   * `checks`: the EntityManager's hooks and checks, timed before the clock starts. Counted here so
   * that the EntityManager returns the flush's result as it is: copying it with an object spread
   * to add them is slow right after a full GC (docs/design-notes.md, "The flush result returned
   * without a copy").
   */
  constructor(checks: number) {
    this.phases = { checks, ids: 0, changes: 0, plan: 0, render: 0, write: 0, record: 0 }
  }

  lap(phase: keyof FlushPhases): void {
    const now = performance.now()
    this.phases[phase] += now - this.last
    this.last = now
  }

  /** The sum of the phases: the checks, then the time since the clock started, as of the last lap. */
  total(): number {
    return this.phases.checks + this.last - this.started
  }
}
