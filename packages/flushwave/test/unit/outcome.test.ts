import { describe, expect, it } from 'vitest'
import { resolveOutcome } from '../../src/drivers/protocol/outcome.js'
import type { OpenProbe } from '../../src/drivers/port.js'
import { defineSchema, entity, t } from '../../src/index.js'
import { renderEvidence } from '../../src/sql/render-evidence.js'
import type { WriteStatement } from '../../src/sql/statement.js'

/** A server that answers each probe from a script, recording what it was asked. */
function server(answer: (text: string, params: readonly string[]) => unknown[][] | Error) {
  const asked: string[] = []
  const open: OpenProbe = () => ({
    probe: async (text, params) => {
      asked.push(text.split(/\s+/).slice(0, 3).join(' '))
      const result = answer(text, params)
      if (result instanceof Error) throw result
      return result
    },
    close: async () => {},
  })
  return { open, asked }
}
const soon = () => performance.now() + 2_000

describe('resolving the outcome of a flush whose connection failed', () => {
  it('asks pg_xact_status with the transaction id it captured', async () => {
    for (const [status, outcome] of [['committed', 'committed'], ['aborted', 'rolled-back'], [null, 'unknown']] as const) {
      const { open } = server(() => [[status]])
      expect(await resolveOutcome(open, { xid: '42', pid: 7 }, soon())).toBe(outcome)
    }
  })

  it('ends a transaction still in progress, then asks again', async () => {
    let ended = false
    const { open, asked } = server((text) => {
      if (text.includes('pg_terminate_backend')) return (ended = true), [[true]]
      return [[ended ? 'aborted' : 'in progress']]
    })
    expect(await resolveOutcome(open, { xid: '42', pid: 7 }, soon())).toBe('rolled-back')
    expect(asked).toEqual(['select pg_xact_status($1::xid8)', 'select pg_terminate_backend($1::int4)', 'select pg_xact_status($1::xid8)'])
  })

  it('takes "in the future" (a crash lost the transaction before the WAL) as rolled back', async () => {
    const error = Object.assign(new Error('transaction ID 767 is in the future'), { code: '22023' })
    expect(await resolveOutcome(server(() => error).open, { xid: '767', pid: 7 }, soon())).toBe('rolled-back')
  })

  it('without an id: ends the server process if it is in a transaction and asks about that one', async () => {
    const { open } = server((text) => (text.includes('pg_stat_activity') ? [['4294967301', true]] : [['aborted']]))
    expect(await resolveOutcome(open, { xid: undefined, pid: 7 }, soon())).toBe('rolled-back')
  })

  it('without an id or a transaction: committed only when every row inserted with sequence ids exists', async () => {
    const evidence = { text: 'select count(*)', params: ['{1,2,3}'], rows: 3 }
    const with_ = (found: number) => server((text) => (text.includes('pg_stat_activity') ? [] : [[String(found)]])).open
    expect(await resolveOutcome(with_(3), { xid: undefined, pid: 7 }, soon(), evidence)).toBe('committed')
    expect(await resolveOutcome(with_(0), { xid: undefined, pid: 7 }, soon(), evidence)).toBe('unknown')
    expect(await resolveOutcome(with_(3), { xid: undefined, pid: 7 }, soon())).toBe('unknown')
  })

  it('retries an unreachable server until the deadline, then says unknown', async () => {
    const { open, asked } = server(() => new Error('connect ECONNREFUSED'))
    const started = performance.now()
    expect(await resolveOutcome(open, { xid: '42', pid: 7 }, performance.now() + 300)).toBe('unknown')
    expect(asked.length).toBeGreaterThan(1)
    expect(performance.now() - started).toBeLessThan(1_000)
  })
})

describe('evidence of a commit', () => {
  const schema = defineSchema({
    Seq: entity('seq', { id: t.id(), name: t.text() }),
    Mine: entity('mine', { id: t.providedId(), name: t.text() }),
  })
  const insert = (name: 'Seq' | 'Mine', ids: string[]): WriteStatement => ({
    text: 'insert …',
    params: [],
    returnsRows: false,
    op: { kind: 'insert', entity: schema.entities.get(name)!, ids, columns: [] },
  })

  it('counts the rows of the first insert with sequence ids, never ids the application chose', () => {
    expect(renderEvidence([[insert('Mine', ['1'])]])).toBeUndefined()
    expect(renderEvidence([[insert('Mine', ['1']), insert('Seq', ['5', '6'])]])).toEqual({
      text: 'select count(*)::int8 from "seq" where "id" = any($1::int8[])',
      params: ['{"5","6"}'],
      rows: 2,
    })
  })
})
