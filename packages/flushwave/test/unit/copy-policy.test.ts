import { describe, expect, it } from 'vitest'
import { defineSchema, entity, t } from '../../src/index.js'
import { AUTO_COPY_ROWS, copies, COPY_SAVES_MS_PER_ROW, type CopyPolicy } from '../../src/plan/copy-policy.js'
import type { InsertOp, Op } from '../../src/plan/ops.js'

const schema = defineSchema({
  Plain: entity('plain', { id: t.id(), name: t.text(), n: t.integer(), amount: t.numeric(), flag: t.boolean() }),
  Stamped: entity('stamped', { id: t.id(), name: t.text(), at: t.timestamptz() }),
  Bytes: entity('bytes', { id: t.id(), data: t.bytea() }),
})
const meta = (name: 'Plain' | 'Stamped' | 'Bytes') => schema.meta(name)

function insert(name: 'Plain' | 'Stamped' | 'Bytes', rows: number, extra: Partial<InsertOp> = {}): InsertOp {
  const entity = meta(name)
  return { kind: 'insert', entity, ids: Array.from({ length: rows }, (_, i) => String(i + 1)), columns: entity.fields.map(() => []), ...extra }
}

const auto = (extraMs: number): CopyPolicy => ({ minRows: AUTO_COPY_ROWS, auto: true, extraMs })

describe('which inserts go by COPY', () => {
  it('the cost model: from AUTO_COPY_ROWS rows, tables whose columns all go as text', () => {
    expect(copies(insert('Plain', AUTO_COPY_ROWS), auto(0))).toBe(true)
    expect(copies(insert('Plain', AUTO_COPY_ROWS - 1), auto(0))).toBe(false)
    // Timestamps travel as epoch milliseconds, bytea as hex: COPY would turn them into text.
    expect(copies(insert('Stamped', 100_000), auto(0))).toBe(false)
    expect(copies(insert('Bytes', 100_000), auto(0))).toBe(false)
  })

  it('where COPY costs a round trip, only when the rows save more than it', () => {
    const rows = 40_000
    const saved = rows * COPY_SAVES_MS_PER_ROW
    expect(copies(insert('Plain', rows), auto(saved * 0.9))).toBe(true)
    expect(copies(insert('Plain', rows), auto(saved * 1.1))).toBe(false)
  })

  it("the application's copyRows: every plain insert from that many rows, whatever its types", () => {
    const set: CopyPolicy = { minRows: 50, auto: false, extraMs: 1_000 }
    expect(copies(insert('Stamped', 50), set)).toBe(true)
    expect(copies(insert('Bytes', 49), set)).toBe(false)
  })

  it('never an upsert, an insert the server fills columns of, another op, or without a policy', () => {
    const set: CopyPolicy = { minRows: 1, auto: false, extraMs: 0 }
    expect(copies(insert('Plain', 10, { omit: [1] }), set)).toBe(false)
    expect(copies(insert('Plain', 10, { upsert: { key: [], update: [] } as never }), set)).toBe(false)
    expect(copies({ kind: 'delete', entity: meta('Plain'), ids: ['1'] } as unknown as Op, set)).toBe(false)
    expect(copies(insert('Plain', AUTO_COPY_ROWS), undefined)).toBe(false)
  })
})
