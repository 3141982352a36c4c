import { describe, expect, it } from 'vitest'
import { planFlush } from '../../src/plan/planner.js'
import { bigint, integer, numeric } from '../../src/schema/column-types.js'
import { renderPlan } from '../../src/sql/render-write.js'
import { bookstore } from '../support/bookstore.js'

const Book = bookstore.meta('Book')
const Author = bookstore.meta('Author')
const empty = { inserts: [], upserts: [], updates: [], deletes: [], linkAdds: [], linkRemoves: [] }

describe('adding deltas (pending increments of one property travel as one)', () => {
  it('adds decimals exactly, whatever their form', () => {
    const add = numeric.add!
    expect(add('0.1', '0.2')).toBe('0.3')
    expect(add('0.10', '-0.1')).toBe('0.00')
    expect(add('-1.5', '0.25')).toBe('-1.25')
    expect(add('1e3', '.5')).toBe('1000.5')
    expect(add('12', '1E-3')).toBe('12.001')
    expect(add('99999999999999999999.99', '0.01')).toBe('100000000000000000000.00')
    expect(add('-0.001', '0.0005')).toBe('-0.0005')
    expect(add(String(1e21), '1')).toBe('1000000000000000000001')
  })

  it('adds integers and bigints as numbers do', () => {
    expect(integer.add!(2, -5)).toBe(-3)
    expect(bigint.add!(2n ** 62n, 2n ** 62n - 1n)).toBe(2n ** 63n - 1n)
  })

  it('counts only number columns, never the version or a reference', () => {
    expect(Book.counters.map((f) => f.prop)).toEqual(['pages'])
    expect(Author.counters.map((f) => f.prop)).toEqual(['rating'])
  })
})

describe('an update with increments', () => {
  const pages = Book.fields.findIndex((f) => f.prop === 'pages')
  const title = Book.fields.findIndex((f) => f.prop === 'title')
  const plan = planFlush(
    {
      ...empty,
      updates: [
        { entity: Book, id: '1', changed: new Map(), increments: new Map([[pages, '-3']]) },
        { entity: Book, id: '2', changed: new Map([[title, 'new']]) },
      ],
    },
    bookstore,
  )
  const [statement] = renderPlan(plan)[0]!

  it('is one op: a delta per counter and row, null where a row adds nothing', () => {
    const op = plan.waves[0]!.ops[0]!
    expect(op.kind === 'update' && op.increments).toEqual([['-3', null]])
  })

  it('adds on the server, returns the rows it wrote, and fails when one is missing', () => {
    expect(statement!.text).toContain('"pages" = (case when d.s2 then d.v2 else t."pages" end) + coalesce(d.i1, 0)')
    expect(statement!.text).toContain('returning t."id" as k, t."pages" as c1)')
    expect(statement!.text).toContain(`select w.k::text, w.c1 from (select ('flushwave-stale:book:'`)
    expect(statement!.text).toMatch(/as x\(stale\) left join w on x\.stale is null$/)
    // One bind parameter per array: the key, a value and a flag per field, a delta per counter.
    expect(statement!.params).toHaveLength(1 + 2 * Book.fields.length + 1)
    expect(statement!.params.at(-1)).toBe('{"-3",NULL}')
  })

  it('has the same text whatever the rows and columns changed', () => {
    const other = planFlush({ ...empty, updates: [{ entity: Book, id: '9', changed: new Map([[title, 'x']]), increments: new Map([[pages, '1']]) }] }, bookstore)
    expect(renderPlan(other)[0]![0]!.text).toBe(statement!.text)
  })
})
