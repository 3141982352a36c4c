import { describe, expect, it } from 'vitest'
import { threadCpu } from '../src/thread-cpu.js'

describe('thread CPU', () => {
  it.runIf(process.platform === 'linux')('advances while this thread computes, and barely while it waits', async () => {
    const cpu = threadCpu()!
    try {
      const start = cpu.read()
      // Until 20 ms of CPU (a loaded machine gives it more slowly), for 5 s at most.
      const deadline = performance.now() + 5000
      while (cpu.read() - start < 20 && performance.now() < deadline);
      expect(cpu.read() - start).toBeGreaterThanOrEqual(20)
      const before = cpu.read()
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(cpu.read() - before).toBeLessThan(10)
    } finally {
      cpu.close()
    }
  })
})
