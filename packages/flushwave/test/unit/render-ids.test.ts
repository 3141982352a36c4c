import { describe, expect, it } from 'vitest'
import { SchemaError } from '../../src/index.js'
import { readNextIds, renderNextIds } from '../../src/sql/render-ids.js'

const requests = [
  { quotedTable: '"author"', column: 'id', count: 3 },
  { quotedTable: '"book"', column: 'id', count: 2 },
]

describe('id allocation statement', () => {
  it('is one statement for every table, with one bind parameter per request field', () => {
    const s = renderNextIds(requests)
    expect(s.params).toEqual(['{"\\"author\\"","\\"book\\""}', '{"id","id"}', '{"3","2"}'])
    expect(s.text).toContain('as materialized')
  })

  it('reads a block per request: a range, or the listed values when they have gaps', () => {
    const blocks = readNextIds(requests, [
      ['2', '1', '7', 2, '7,9'],
      ['1', '1', '100', 3, null],
    ])
    expect(blocks).toEqual([
      { first: 100n, count: 3, step: 1 },
      { first: 7n, count: 2, step: 1, starts: ['7', '9'] },
    ])
  })

  it('reads a pooled sequence as whole blocks of its increment', () => {
    const blocks = readNextIds(requests, [
      ['1', '1000', '1', 1, null],
      ['2', '50', '1', 2, '1,1001'],
    ])
    expect(blocks).toEqual([
      { first: 1n, count: 1000, step: 1000 },
      { first: 1n, count: 100, step: 50, starts: ['1', '1001'] },
    ])
  })

  it('says which column has no sequence', () => {
    expect(() => readNextIds(requests, [['1', '1', null, 3, null]])).toThrow(SchemaError)
    expect(() => readNextIds(requests, [['1', '1', null, 3, null]])).toThrow('"author".id has no sequence')
  })
})
