import { describe, expect, it } from 'vitest'
import { writeText } from '../../src/schema/column-types.js'
import { flushCandidates } from '../../src/entities/dirty.js'
import { STATE, type HasState } from '../../src/entities/entity-state.js'
import { UnitOfWork } from '../../src/entities/unit-of-work.js'
import { bookstore } from '../support/bookstore.js'

/**
 * Which entities a flush diffs, without a database: rows are merged as the loader merges them.
 * A flush must see every change, and walk only the entities that can have one (see
 * flushCandidates): this is what keeps a no-op flush over many loaded entities cheap.
 */
const Author = bookstore.entities.get('Author')!
const Book = bookstore.entities.get('Book')!

/** Loads `n` authors (id, name, email, rating, created_at) and one book with a JSON value. */
function loaded(n: number) {
  const uow = new UnitOfWork()
  const authors = Array.from({ length: n }, (_, i) => uow.hydrate(Author, [String(i + 1), `a${i}`, null, '0', new Date(Date.UTC(2020, 0, 1, 0, 0, i))]) as HasState & Record<string, unknown>)
  const book = uow.hydrate(Book, ['1', 'b', null, 'draft', '{"isbn":"x"}', '1']) as HasState & Record<string, unknown>
  return { uow, authors, book }
}

describe('flushCandidates', () => {
  it('walks none of the loaded entities whose Dates and JSON values were never handed out', () => {
    const { uow } = loaded(1000)
    expect(flushCandidates(uow.map)).toEqual([])
    expect(uow.map.watched.size).toBe(0)
    expect(uow.map.pending.length).toBe(0)
  })

  it('diffs a loaded Date changed in place once a getter handed it out, and only that entity', () => {
    const { uow, authors } = loaded(100)
    const date = authors[7]!.createdAt as Date
    expect(uow.map.watched.size).toBe(1)
    expect(flushCandidates(uow.map)).toEqual([]) // read, not changed
    date.setUTCFullYear(1999)
    expect(flushCandidates(uow.map)).toEqual([authors[7]])
  })

  it('diffs a JSON value changed in place once a getter handed it out', () => {
    const { uow, book } = loaded(1)
    ;(book.meta as { tags?: string[] }).tags = ['t']
    expect(flushCandidates(uow.map)).toEqual([book])
  })

  it('diffs values handed out by toJSON', () => {
    const { uow, authors, book } = loaded(3)
    const json = authors[1]!.toJSON as () => { createdAt: Date }
    json.call(authors[1]).createdAt.setTime(0)
    ;(book as unknown as { toJSON(): { meta: { isbn: string } } }).toJSON().meta.isbn = 'y'
    expect(new Set(flushCandidates(uow.map))).toEqual(new Set([authors[1], book]))
  })

  it('diffs a Date the caller passed to create(), or assigned, when it changes in place after the flush took it', () => {
    const { uow, authors } = loaded(2)
    const given = new Date(0)
    const created = uow.create(Author, { name: 'n', createdAt: given })
    const assigned = new Date(1)
    authors[0]!.createdAt = assigned
    expect(new Set(flushCandidates(uow.map))).toEqual(new Set([created, authors[0]]))
    // What a committed flush leaves: both managed, untouched, their Dates' texts in the snapshot.
    for (const entity of [created, authors[0]!]) {
      const state = entity[STATE]
      state.status = 'managed'
      state.touched = false
      state.snapshot = { ...state.snapshot, createdAt: writeText(Author.fieldByProp.get('createdAt')!.type, state.values.createdAt) }
    }
    expect(flushCandidates(uow.map)).toEqual([])
    given.setTime(5)
    assigned.setTime(6)
    expect(new Set(flushCandidates(uow.map))).toEqual(new Set([created, authors[0]]))
  })

  it('keeps every new, touched or removed entity, and forgets them once a flush has taken them', () => {
    const { uow, authors } = loaded(5)
    authors[1]!.name = 'renamed'
    uow.remove(authors[3]!)
    const created = uow.create(Author, { name: 'new' })
    expect(flushCandidates(uow.map)).toEqual([authors[1], authors[3], created])
    authors[1]![STATE].touched = false
    expect(flushCandidates(uow.map)).toEqual([authors[3], created])
    expect(uow.map.pending.includes(authors[1]!)).toBe(false)
  })
})

/**
 * A `defaultNow()` time nobody has read is held as its epoch milliseconds (see EntityState.values):
 * what user code sees must be what it saw when every default was a Date.
 */
describe('defaultNow times', () => {
  const createdAt = Author.fieldByProp.get('createdAt')!

  it('are held as a number until read, then as one Date that every later read returns', () => {
    const uow = new UnitOfWork()
    const before = Date.now()
    const author = uow.create(Author, { name: 'n' }) as HasState & { createdAt: Date }
    const after = Date.now()
    const held = author[STATE].values.createdAt
    expect(typeof held).toBe('number')
    expect(held).toBeGreaterThanOrEqual(before)
    expect(held).toBeLessThanOrEqual(after)
    expect(uow.map.watched.size).toBe(0)
    const date = author.createdAt
    expect(date).toBeInstanceOf(Date)
    expect(date.getTime()).toBe(held)
    expect(author.createdAt).toBe(date)
    expect(author[STATE].values.createdAt).toBe(date)
    // Handed out, it may change in place: the entity is watched from now on.
    expect(uow.map.watched.has(author)).toBe(true)
  })

  it('write the same text whether read or not, and toJSON hands out the Date', () => {
    const uow = new UnitOfWork()
    const unread = uow.create(Author, { name: 'a' })
    const read = uow.create(Author, { name: 'b' }) as HasState & { createdAt: Date }
    const time = unread[STATE].values.createdAt as number
    expect(writeText(createdAt.type, time)).toBe(writeText(createdAt.type, new Date(time)))
    expect(createdAt.type.toText(time as unknown as Date)).toBe(new Date(time).toISOString())
    expect(writeText(createdAt.type, read.createdAt)).toBe(String(read.createdAt.getTime()))
    const json = (unread as unknown as { toJSON(): { createdAt: unknown } }).toJSON()
    expect(json.createdAt).toBeInstanceOf(Date)
    expect((json.createdAt as Date).getTime()).toBe(time)
    expect(unread[STATE].values.createdAt).toBe(json.createdAt)
    expect(uow.map.watched.has(unread)).toBe(true)
  })
})
