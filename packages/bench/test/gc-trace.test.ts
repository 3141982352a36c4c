import { execFileSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { parseScavenges, summarize } from '../src/gc-trace.js'

// Lines as Node 20 prints them, cut short: the fields that matter keep their place among the others.
const mainScavenge = (pause: number, promoted: number, survived: number) =>
  `[26079:0xa3cbce0]       50 ms: pause=${pause} mutator=45.8 gc=s reduce_memory=0 fast_promote=0.00 scavenge=0.84 scavenge.parallel=0.72 ` +
  `allocated=4854536 promoted=${promoted} new_space_survived=${survived} nodes_died_in_new=1 nodes_promoted=7 promotion_ratio=0.0%`
const workerScavenge =
  '[26079:0x7fbae8000f00]       16 ms: pause=0.7 mutator=15.0 gc=s nodes_promoted=3 reduce_memory=0 promoted=999 new_space_survived=999'
const fullGc = '[26079:0xa3cbce0]     1663 ms: pause=2.3 mutator=9.0 gc=mc reduce_memory=0 promoted=201680 new_space_survived=0'

describe('GC trace', () => {
  it('reads each scavenge, not full GCs or other output', () => {
    const trace = [mainScavenge(0.9, 1000, 2000), 'a line of the program', fullGc, workerScavenge, mainScavenge(3.4, 800_000, 900_000)].join('\n')
    expect(parseScavenges(trace)).toEqual([
      { isolate: '0xa3cbce0', pauseMs: 0.9, promoted: 1000, survived: 2000 },
      { isolate: '0x7fbae8000f00', pauseMs: 0.7, promoted: 999, survived: 999 },
      { isolate: '0xa3cbce0', pauseMs: 3.4, promoted: 800_000, survived: 900_000 },
    ])
  })

  it("summarizes the last scavenges of the isolate that had the most (the main thread's)", () => {
    const trace = [workerScavenge, mainScavenge(9, 0, 0), mainScavenge(1, 1024, 2048), mainScavenge(2, 2048, 2048), mainScavenge(3, 3072, 5120)].join('\n')
    expect(summarize(parseScavenges(trace), 3)).toEqual({ count: 3, pauseMedianMs: 2, pauseMaxMs: 3, promotedKb: 2, survivedKb: 3 })
    expect(summarize([], 3)).toBeUndefined()
  })

  it('reads what this Node.js prints', () => {
    // A child that allocates enough to be scavenged; the format is V8's and could change with Node.
    const script = 'let keep = []; for (let i = 0; i < 200000; i++) { keep.push({ i }); if (keep.length > 1000) keep = [] }'
    const trace = execFileSync(process.execPath, ['--trace-gc-nvp', '-e', script], { encoding: 'utf8' })
    const scavenges = parseScavenges(trace)
    expect(scavenges.length).toBeGreaterThan(0)
    for (const s of scavenges) {
      expect(s.pauseMs).toBeGreaterThanOrEqual(0)
      expect(Number.isInteger(s.promoted) && Number.isInteger(s.survived)).toBe(true)
    }
  })
})
