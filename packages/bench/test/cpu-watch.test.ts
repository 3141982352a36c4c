import { readlinkSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { CpuWatch, cpuDelta, machineCpu, ownThreads, parseSchedstat } from '../src/cpu-watch.js'

describe('CPU watch', () => {
  it('reads a schedstat line as ms on a CPU and ms waiting for one', () => {
    expect(parseSchedstat('2500000 1000000 7\n')).toEqual({ run: 2.5, wait: 1 })
    expect(() => parseSchedstat('nonsense')).toThrow(/schedstat/)
  })

  it('subtracts group by group', () => {
    expect(cpuDelta({ a: { run: 1, wait: 2 }, b: { run: 3, wait: 4 } }, { a: { run: 5, wait: 2 }, b: { run: 3.5, wait: 6 } })).toEqual({
      a: { run: 4, wait: 0 },
      b: { run: 0.5, wait: 2 },
    })
  })

  it('is undefined when a counter cannot be opened', () => {
    expect(CpuWatch.open({ missing: ['/proc/no-such-process/schedstat'] })).toBeUndefined()
  })

  it.runIf(process.platform === 'linux')("lists this process's threads and sums a group's counters", () => {
    const own = ownThreads()!
    expect(own.main).toEqual([`/proc/${process.pid}/task/${process.pid}/schedstat`])
    // The thread running this test is one of them (the main one, or a test runner's worker).
    const [, tid] = /task\/(\d+)$/.exec(readlinkSync('/proc/thread-self'))!
    expect([...own.main, ...own.others]).toContain(`/proc/${process.pid}/task/${tid}/schedstat`)
    const watch = CpuWatch.open({ self: ['/proc/thread-self/schedstat'], all: [...own.main, ...own.others] })!
    try {
      const before = watch.sample()
      // Until 20 ms of CPU on this thread (a loaded machine gives it more slowly), for 5 s at most.
      const deadline = performance.now() + 5000
      while (cpuDelta(before, watch.sample()).self.run < 20 && performance.now() < deadline);
      const spent = cpuDelta(before, watch.sample())
      expect(spent.self.run).toBeGreaterThanOrEqual(20)
      expect(spent.all.run).toBeGreaterThanOrEqual(spent.self.run)
      expect(spent.self.wait).toBeGreaterThanOrEqual(0)
    } finally {
      watch.close()
    }
  })

  it.runIf(process.platform === 'linux')("reads the machine's busy time in ticks", () => {
    const cpu = machineCpu()!
    expect(cpu.busy).toBeGreaterThan(0)
    expect(cpu.busy % 10).toBe(0)
    expect(cpu.steal).toBeGreaterThanOrEqual(0)
  })
})
