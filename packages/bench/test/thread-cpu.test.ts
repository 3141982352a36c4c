import { describe, expect, it } from 'vitest'
import { threadCpu } from '../src/thread-cpu.js'

/** CPU ms this thread spends over a `ms` wait: the least of `tries` waits. */
async function quietestWait(cpu: { read(): number }, ms: number, tries: number): Promise<number> {
  let least = Infinity
  for (let i = 0; i < tries; i++) {
    const before = cpu.read()
    await new Promise((resolve) => setTimeout(resolve, ms))
    least = Math.min(least, cpu.read() - before)
  }
  return least
}

describe('thread CPU', () => {
  it.runIf(process.platform === 'linux')('advances while this thread computes, and barely while it waits', async () => {
    const cpu = threadCpu()!
    try {
      const start = cpu.read()
      // Until 20 ms of CPU (a loaded machine gives it more slowly), for 5 s at most.
      const deadline = performance.now() + 5000
      while (cpu.read() - start < 20 && performance.now() < deadline);
      expect(cpu.read() - start).toBeGreaterThanOrEqual(20)
      // A wall clock would count the whole wait. The runtime may still spend 10-20 ms on this thread
      // once a loop ends (GC, compilation): so a tenth of a 500 ms wait, the quietest of three.
      expect(await quietestWait(cpu, 500, 3)).toBeLessThan(50)
    } finally {
      cpu.close()
    }
  })
})
