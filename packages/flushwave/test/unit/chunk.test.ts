import { describe, expect, it } from 'vitest'
import { insertsOf } from '../../src/plan/changes.js'
import { chunk } from '../../src/plan/chunk.js'
import { planFlush } from '../../src/plan/planner.js'
import { bookstore } from '../support/bookstore.js'

const Tag = bookstore.meta('Tag')

describe('chunk', () => {
  it('splits an op into ops of at most maxRows rows, keeping columns aligned and order', () => {
    const plan = planFlush(
      { inserts: insertsOf([1, 2, 3, 4, 5].map((i) => ({ entity: Tag, id: String(i), values: [`t${i}`] }))), upserts: [], updates: [], deletes: [], linkAdds: [], linkRemoves: [] },
      bookstore,
      [],
      2,
    )
    const ops = plan.waves[0]!.ops
    expect(ops.map((op) => (op.kind === 'insert' ? [op.ids, op.columns] : op.kind))).toEqual([
      [['1', '2'], [['t1', 't2']]],
      [['3', '4'], [['t3', 't4']]],
      [['5'], [['t5']]],
    ])
    expect(chunk(ops[0]!, 10)).toEqual([ops[0]])
  })
})
