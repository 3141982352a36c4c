import { describe, expect, it } from 'vitest'
import { PIECE_ROWS, renderCopy } from '../../src/sql/render-copy.js'
import { bookstoreUuid } from '../support/bookstore-uuid.js'

const Review = bookstoreUuid.meta('Review')

describe('COPY rows', () => {
  it('come in pieces of whole lines, rendered when asked for, that together are every row in order', () => {
    const rows = PIECE_ROWS * 2 + 3
    const ids = Array.from({ length: rows }, (_, r) => `00000000-0000-7000-8000-${String(r).padStart(12, '0')}`)
    // Fields in order: stars, body (nullable text with a tab, a backslash, a newline and a carriage return), book.
    const columns = [ids.map((_, r) => String((r % 5) + 1)), ids.map((_, r) => (r % 7 === 0 ? null : `b${r}\t\\\n\r`)), ids.map(() => ids[0]!)]
    const statement = renderCopy({ kind: 'insert', entity: Review, ids, columns, copy: true })
    expect(statement.text).toMatch(/^copy "review" \(.+\) from stdin$/)
    expect(statement.copy!.rows).toBe(rows)
    const pieces = [...statement.copy!.pieces()]
    expect(pieces).toHaveLength(3)
    for (const piece of pieces) expect(piece.endsWith('\n')).toBe(true)
    const lines = pieces.join('').split('\n')
    expect(lines.pop()).toBe('')
    expect(lines).toEqual(ids.map((id, r) => `${id}\t${(r % 5) + 1}\t${r % 7 === 0 ? '\\N' : `b${r}\\t\\\\\\n\\r`}\t${ids[0]}`))
    // Asked again, the same text: nothing is used up.
    expect([...statement.copy!.pieces()].join('')).toBe(pieces.join(''))
  })

  it('of an empty insert are no piece at all', () => {
    const statement = renderCopy({ kind: 'insert', entity: Review, ids: [], columns: [[], [], []], copy: true })
    expect([...statement.copy!.pieces()]).toEqual([])
  })
})
