import { setFlagsFromString } from 'node:v8'
import { describe, expect, it } from 'vitest'
import { STATE, type HasState } from '../../src/entities/entity-state.js'
import { UnitOfWork } from '../../src/entities/unit-of-work.js'
import { bookstore } from '../support/bookstore.js'

/**
 * Every Flushwave instance keeps one never-flushed unit of work with a specimen of each entity type
 * (UnitOfWork.keepHiddenClasses), so that V8 does not free the hidden classes of entities between
 * requests and deoptimise the flush path. That only works while the specimens have the hidden
 * classes real entities get: these tests ask V8 (%HaveSameMap).
 */
setFlagsFromString('--allow-natives-syntax')
const sameHiddenClass = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean

const Author = bookstore.entities.get('Author')!
const Book = bookstore.entities.get('Book')!

describe('kept hidden classes', () => {
  const specimens = new Map(new UnitOfWork().keepHiddenClasses(bookstore.entities.values()).map((e) => [e[STATE].meta.name, e]))
  const specimen = (name: string) => specimens.get(name)! as Held
  type Held = HasState & Record<string, object>

  it('keep one specimen of every entity type', () => {
    expect([...specimens.keys()]).toEqual([...bookstore.entities.keys()])
  })

  it('are those of created, read and flushed entities: object, state, values, snapshot and collections', () => {
    const uow = new UnitOfWork()
    const author = uow.create(Author, { name: 'a', email: 'a@example.com', rating: '1' }) as Held
    const book = uow.create(Book, { title: 't', pages: 3, meta: { isbn: 'x' }, author }) as Held
    const read = uow.hydrate(Author, ['7', 'n', null, '0', new Date(0)]) as Held
    for (const [entity, name] of [[author, 'Author'], [book, 'Book'], [read, 'Author']] as const) {
      const like = specimen(name)
      expect(sameHiddenClass(entity, like)).toBe(true)
      expect(sameHiddenClass(entity[STATE], like[STATE])).toBe(true)
      expect(sameHiddenClass(entity[STATE].values, like[STATE].values)).toBe(true)
    }
    // A read row's snapshot, and a new row's once flushed, are records of every field in schema order too.
    expect(sameHiddenClass(read[STATE].snapshot!, specimen('Author')[STATE].values)).toBe(true)
    expect(sameHiddenClass(author.books!, specimen('Author').books!)).toBe(true)
    expect(sameHiddenClass(book.tags!, specimen('Book').tags!)).toBe(true)
    expect(sameHiddenClass(book.reviews!, specimen('Book').reviews!)).toBe(true)
  })

  it('are not the hidden classes of other records: the check can fail', () => {
    expect(sameHiddenClass(specimen('Author')[STATE].values, specimen('Book')[STATE].values)).toBe(false)
    const reversed: Record<string, unknown> = {}
    for (const field of [...Author.fields].reverse()) reversed[field.prop] = null
    expect(sameHiddenClass(reversed, specimen('Author')[STATE].values)).toBe(false)
  })
})
