import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTablesSql, defineSchema, entity, SchemaError, t } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

const schema = defineSchema({
  // author.favoriteBook ↔ book.author: immediate FKs, broken at the nullable side.
  Author: entity('author', { id: t.id(), name: t.text(), favoriteBook: t.manyToOne('Book').nullable() }),
  Book: entity('book', { id: t.id(), title: t.text(), author: t.manyToOne('Author') }),
  Employee: entity('employee', { id: t.id(), name: t.text(), manager: t.manyToOne('Employee').nullable() }),
  // A cycle of non-null references, declared deferrable: no fix-up is needed, none is sent.
  Left: entity('left_side', { id: t.id(), right: t.manyToOne('Right').deferrable() }),
  Right: entity('right_side', { id: t.id(), left: t.manyToOne('Left') }),
})

let db: TestDatabase<typeof schema.defs>
beforeAll(async () => {
  db = await testDatabase(schema, { name: 'cycles' })
})
afterAll(() => db.close())

describe('reference cycles', () => {
  it('are ordered at definition time, and refused when every reference is non-null and immediate', () => {
    expect(schema.insertOrder.map((m) => m.name)).toEqual(['Author', 'Book', 'Employee', 'Left', 'Right'])
    expect(schema.meta('Author').fieldByProp.get('favoriteBook')!.ref!.fixUp).toBe(true)
    expect(createTablesSql(schema).filter((s) => s.startsWith('alter table'))).toEqual([
      'alter table "author" add constraint "author_favorite_book_id_fkey" foreign key ("favorite_book_id") references "book" ("id")',
      'alter table "left_side" add constraint "left_side_right_id_fkey" foreign key ("right_id") references "right_side" ("id") deferrable initially deferred',
    ])
    expect(() =>
      defineSchema({ A: entity('a', { id: t.id(), b: t.manyToOne('B') }), B: entity('b', { id: t.id(), a: t.manyToOne('A') }) }),
    ).toThrow(SchemaError)
  })

  it('inserts both sides of a cycle in one pipeline: NULL first, then a fix-up update', async () => {
    const em = db.orm.em()
    const author = em.create('Author', { name: 'ann' })
    const book = em.create('Book', { title: 'first', author })
    author.favoriteBook = book
    db.queries.length = 0
    const result = await em.flush()
    expect(result.waves).toBe(1)
    expect(db.writes().map((q) => q.text.slice(0, 20))).toEqual(['insert into "author"', 'insert into "book" (', 'update "author" set '])
    // The author's one-row insert sends its favorite book as NULL; the update sets it.
    expect(db.writes()[0]!.params[2]).toBeNull()
    const [row] = await db.sql`select favorite_book_id from author where id = ${author.id}`
    expect(Number(row!.favorite_book_id)).toBe(book.id)
    // Nothing is left dirty: the fix-up was the value the entity already had.
    expect((await em.flush()).statements).toBe(0)
    // A reference to a row that already exists needs no fix-up.
    const second = em.create('Author', { name: 'bob', favoriteBook: book })
    db.queries.length = 0
    await em.flush()
    expect(db.writes().map((q) => q.text.slice(0, 20))).toEqual(['insert into "author"'])
    expect(db.writes()[0]!.params[2]).toBe(String(book.id))
    expect(second.favoriteBook).toBe(book)
  })

  it('creates a self-referencing tree in one statement', async () => {
    const em = db.orm.em()
    const ceo = em.create('Employee', { name: 'ceo' })
    const vps = [1, 2].map((i) => em.create('Employee', { name: `vp${i}`, manager: ceo }))
    for (const vp of vps) for (let i = 0; i < 3; i++) em.create('Employee', { name: `${vp.name}.${i}`, manager: vp })
    db.queries.length = 0
    await em.flush()
    expect(db.writes()).toHaveLength(1)
    const rows = await db.sql`select count(*)::int as n from employee e join employee m on m.id = e.manager_id`
    expect(rows[0]!.n).toBe(8)
  })

  it('sends no fix-up for a deferrable cycle of non-null references', async () => {
    const em = db.orm.em()
    const left = em.create('Left', {}) // its right side does not exist yet
    await expect(em.flush()).rejects.toThrow(/Left.right is required: set it before flushing/)
    const right = em.create('Right', { left })
    left.right = right
    db.queries.length = 0
    await em.flush()
    expect(db.writes().map((q) => q.text.split(' (')[0])).toEqual(['insert into "left_side"', 'insert into "right_side"'])
    const [row] = await db.sql`select right_id from left_side where id = ${left.id}`
    expect(Number(row!.right_id)).toBe(right.id)
  })
})
