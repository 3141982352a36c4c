import { closeSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs'

/** A group of threads' scheduler time, in ms: on a CPU, and runnable but waiting for one. */
export interface CpuTime {
  readonly run: number
  readonly wait: number
}

/**
 * Where the CPU time went while a flush ran, on Linux: the scheduler's counters
 * (/proc/<pid>/task/<tid>/schedstat: ns on a CPU, ns runnable but waiting for one) of named groups
 * of threads, read before and after. A flush whose server backend waited for a CPU while V8's
 * background threads ran lost that CPU to them; otherwise to another process (the client's other
 * side, the server's own, or the machine's). Reading one counter costs about 5 µs.
 */
export class CpuWatch<G extends string> {
  private readonly buffer = Buffer.alloc(128)

  private constructor(private readonly groups: ReadonlyArray<readonly [G, number[]]>) {}

  /** Undefined where the counters do not exist (not Linux, or a kernel without schedstats). */
  static open<G extends string>(groups: Record<G, readonly string[]>): CpuWatch<G> | undefined {
    const opened: [G, number[]][] = []
    try {
      for (const [group, paths] of Object.entries(groups) as [G, readonly string[]][]) opened.push([group, paths.map((p) => openSync(p, 'r'))])
    } catch {
      for (const [, fds] of opened) for (const fd of fds) closeSync(fd)
      return undefined
    }
    return new CpuWatch(opened)
  }

  /** Every group's totals so far. A thread that has ended counts as 0 from then on: take deltas over short spans. */
  sample(): Record<G, CpuTime> {
    const out = {} as Record<G, CpuTime>
    for (const [group, fds] of this.groups) {
      let run = 0
      let wait = 0
      for (const fd of fds) {
        let line: string
        try {
          line = this.buffer.toString('latin1', 0, readSync(fd, this.buffer, 0, this.buffer.length, 0))
        } catch {
          continue // the thread has exited
        }
        const time = parseSchedstat(line)
        run += time.run
        wait += time.wait
      }
      out[group] = { run, wait }
    }
    return out
  }

  close(): void {
    for (const [, fds] of this.groups) for (const fd of fds) closeSync(fd)
  }
}

/** A schedstat line (`<ns on a CPU> <ns waiting for one> <timeslices>`), in ms. */
export function parseSchedstat(line: string): CpuTime {
  const [onCpu, waiting] = line.split(' ').map(Number)
  if (!Number.isFinite(onCpu) || !Number.isFinite(waiting)) throw new Error(`not a schedstat line: ${JSON.stringify(line)}`)
  return { run: onCpu! / 1e6, wait: waiting! / 1e6 }
}

/** `after − before`, group by group. */
export function cpuDelta<G extends string>(before: Record<G, CpuTime>, after: Record<G, CpuTime>): Record<G, CpuTime> {
  const out = {} as Record<G, CpuTime>
  for (const group of Object.keys(after) as G[]) out[group] = { run: after[group].run - before[group].run, wait: after[group].wait - before[group].wait }
  return out
}

/** Schedstat paths of this process's threads: its main thread, and the rest (V8's compilers and GC helpers, libuv's pool). Undefined off Linux. */
export function ownThreads(): { main: string[]; others: string[] } | undefined {
  let tids: string[]
  try {
    tids = readdirSync('/proc/self/task')
  } catch {
    return undefined
  }
  const path = (tid: string) => `/proc/${process.pid}/task/${tid}/schedstat`
  return { main: [path(String(process.pid))], others: tids.filter((t) => t !== String(process.pid)).map(path) }
}

/** The machine's CPU time from /proc/stat, in ms (10 ms ticks): busy (everything but idle and iowait), and stolen by the hypervisor. */
export function machineCpu(): { busy: number; steal: number } | undefined {
  let line: string
  try {
    line = readFileSync('/proc/stat', 'latin1').split('\n', 1)[0]!
  } catch {
    return undefined
  }
  // cpu user nice system idle iowait irq softirq steal guest guest_nice
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number) as number[]
  const tick = 10 // USER_HZ is 100 on Linux
  return { busy: (user! + nice! + system! + irq! + softirq!) * tick, steal: steal! * tick }
}
