/** A seeded generator of numbers in [0, 1) (mulberry32): a failing seed replays the same steps. */
export function seededRandom(seed: number): () => number {
  let s = seed
  return () => {
    s = (s + 0x6d2b79f5) | 0
    let t = Math.imul(s ^ (s >>> 15), 1 | s)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** The part of an EntityManager a rolled-back transaction of random changes needs. */
interface Transactional {
  transaction<T>(work: (tx: { flush(): Promise<unknown> }) => Promise<T>): Promise<T>
}

/**
 * Runs 1 to 4 of `change` inside `em.transaction()`, with flushes there between them at random
 * (so that loads inside can see rows the transaction wrote), then throws: the transaction rolls
 * back and its changes must be undone.
 */
export async function rolledBackChanges(em: Transactional, next: () => number, change: () => void | Promise<void>, log: string[]): Promise<void> {
  log.push('transaction {')
  await em
    .transaction(async (tx) => {
      for (let i = 0, n = 1 + Math.floor(next() * 4); i <= n; i++) {
        if (next() < 0.3) {
          log.push('flush inside')
          await tx.flush()
        }
        if (i < n) await change()
      }
      throw new Error('roll back')
    })
    .catch((error: unknown) => {
      if (!(error instanceof Error && error.message === 'roll back')) throw error
    })
  log.push('} rolled back')
}
