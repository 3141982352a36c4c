/**
 * Client CPU per unit of work, series side by side: wall time at 0 ms is the client's CPU plus the
 * server's, and on 2 cores they compete. process.cpuUsage() around each timed run counts this
 * process alone (user + system: driver encoding, socket writes, GC), so the gap between an ORM and
 * hand-written SQL shows without the server's share. On Linux, the main thread's share too (see
 * thread-cpu.ts): what the process's other threads (V8's compilers and GC helpers) did is not
 * in it. Linux keeps a process's user and system times monotonic by sometimes holding them back, so
 * for units of work of about a millisecond the main thread's median can come out above the
 * process's (mixedFlush×10 by hand: 1.02 against 0.98 ms); compare series, not the two columns.
 * Samples alternate series by series.
 *
 *   pnpm --filter bench exec tsx src/client-cpu.ts bulkCreate 1 300 flushwave,raw-pipelined
 */
import { fullGc } from './gc.js'
import { sideBySide } from './side-by-side.js'
import { threadCpu } from './thread-cpu.js'

const run = await sideBySide({ scenario: 'bulkCreate', size: 1, rounds: 200, series: 'flushwave,raw-pipelined' })
const { names: list, opened, scenario: sc, rounds } = run
const cpu = list.map(() => [] as number[])
const wall = list.map(() => [] as number[])
const main = list.map(() => [] as number[])
const thread = threadCpu()
for (let i = 0; i < rounds; i++) {
  for (const [s, series] of opened.entries()) {
    const p = await sc.prepare(run.admin, series, `c${i}s${s}`)
    await fullGc()
    const m0 = thread?.read()
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    await p.run()
    wall[s]!.push(performance.now() - t0)
    const c = process.cpuUsage(c0)
    if (m0 !== undefined) main[s]!.push(thread!.read() - m0)
    cpu[s]!.push((c.user + c.system) / 1000)
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!
for (const [s, name] of list.entries()) {
  const onMain = thread ? ` (main thread ${median(main[s]!).toFixed(2)} ms)` : ''
  console.log(`${name} ${sc.name}×${sc.size}: client CPU median ${median(cpu[s]!).toFixed(2)} ms${onMain}, wall median ${median(wall[s]!).toFixed(2)} ms (${rounds} runs)`)
}
thread?.close()
await run.close()
