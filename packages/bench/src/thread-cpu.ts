import { CpuWatch } from './cpu-watch.js'

/**
 * CPU time of the calling thread (a script's main thread), in ms, on Linux: the first field of
 * /proc/thread-self/schedstat (ns on a CPU). process.cpuUsage() counts every thread, V8's
 * background compilers and GC helpers too; the main thread's share is the work that holds a flush
 * up. Reading it costs about 5 µs. Undefined where the file does not exist.
 */
export function threadCpu(): { read(): number; close(): void } | undefined {
  const watch = CpuWatch.open({ self: ['/proc/thread-self/schedstat'] })
  return watch && { read: () => watch.sample().self.run, close: () => watch.close() }
}
