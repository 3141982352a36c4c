/** `cell k of n, elapsed mm:ss, about mm:ss left` on stderr; the estimate is elapsed per finished cell. */
export class Progress {
  private readonly started = performance.now()
  private done = 0

  constructor(private readonly total: number) {}

  /** Before cell k (1-based) starts. */
  line(label: string): string {
    const elapsed = (performance.now() - this.started) / 1000
    const left = this.done > 0 ? (elapsed / this.done) * (this.total - this.done) : undefined
    return `cell ${this.done + 1} of ${this.total}, elapsed ${mmss(elapsed)}, about ${left === undefined ? '?' : mmss(left)} left: ${label}`
  }

  finished(): void {
    this.done++
  }
}

export function mmss(seconds: number): string {
  const s = Math.max(0, Math.round(seconds))
  return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`
}
