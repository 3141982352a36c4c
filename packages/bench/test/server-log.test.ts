import { describe, expect, it } from 'vitest'
import { ServerLog } from '../src/server-log.js'

describe('ServerLog', () => {
  it('reads slow statements from the server output, lines split across pieces, with their UTC end times', () => {
    const log = new ServerLog()
    log.onLog('2026-11-26 00:10:26.948 UTC [11095] LOG:  duration: 3.439 ms  statement: commit\n2026-11-26 00:10:27.')
    log.onLog('001 UTC [11095] LOG:  duration: 1.090 ms  execute w1rtnggi33o4: insert into "author" ("id") select $1::int8\n')
    log.onLog('2026-11-26 00:10:27.002 UTC [11095] LOG:  checkpoint starting: time\n')
    expect(log.slow).toEqual([
      { at: Date.UTC(2026, 10, 26, 0, 10, 26, 948), ms: 3.439, what: 'commit' },
      { at: Date.UTC(2026, 10, 26, 0, 10, 27, 1), ms: 1.09, what: 'insert' },
    ])
  })

  it('finds the statements that ended within a window, whose ends the log gives to the millisecond', () => {
    const log = new ServerLog()
    log.onLog('2026-11-26 00:00:00.010 UTC [1] LOG:  duration: 2.000 ms  statement: commit\n')
    const at = Date.UTC(2026, 10, 26, 0, 0, 0, 10)
    expect(log.between(at - 5.4, at - 0.2)).toHaveLength(1) // the window's end rounds up to the logged millisecond
    expect(log.between(at + 0.5, at + 5)).toHaveLength(1) // its start rounds down
    expect(log.between(at + 1, at + 5)).toHaveLength(0)
    expect(log.between(at - 5, at - 1.5)).toHaveLength(0)
  })
})
