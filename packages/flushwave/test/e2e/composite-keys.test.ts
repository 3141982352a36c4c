/**
 * Composite primary keys, on every executor: a join table that carries its own columns (keyed by
 * two many-to-ones and a text), and a soft-deleted table keyed by a many-to-one and a text. Every
 * operation that takes a key goes by the tuple: create (its key composed at create or by the flush),
 * load, ref, find, populate, findPage, raw rows, one-row and multi-row updates, versioned ones,
 * deletes and their cascades, upserts, and the EntityManager's own checks; still one statement per
 * table, in the one pipeline.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, EntityStateError, InvalidValueError, NotFoundError, OptimisticLockError, raw, SchemaError, t, UniqueViolationError } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'
import { stateOf } from '../../src/entities/entity-state.js'

const schema = defineSchema({
  Student: entity('student', {
    id: t.id(),
    name: t.text(),
    enrollments: t.oneToMany('Enrollment', 'student'),
  }),
  Course: entity('course', {
    code: t.providedId(t.varchar(12)),
    title: t.text(),
    translations: t.oneToMany('Translation', 'course'),
  }),
  Enrollment: entity(
    'enrollment',
    {
      student: t.manyToOne('Student').onDelete('cascade'),
      course: t.manyToOne('Course'),
      term: t.text(),
      grade: t.smallint().nullable(),
      note: t.text().serverDefault("'none'"),
      label: t.text().generated("term || ' ' || coalesce(grade::text, '-')"),
      version: t.version(),
    },
    { primaryKey: ['student', 'course', 'term'] },
  ),
  Translation: entity(
    'translation',
    {
      course: t.manyToOne('Course').onDelete('cascade'),
      lang: t.text(),
      title: t.text(),
      deletedAt: t.timestamptz().nullable(),
    },
    { primaryKey: ['course', 'lang'], softDelete: 'deletedAt' },
  ),
  Tagging: entity('tagging', { token: t.uuid(), lang: t.text(), note: t.text().serverDefault("'none'") }, { primaryKey: ['token', 'lang'] }),
})

/** A term with every character an array literal quotes or escapes. */
const ODD = 'fall, "2024" {x} \\ y'

describe.each(ALL_EXECUTORS)('composite primary keys on %s', (executor) => {
  let db: TestDatabase<typeof schema.defs>
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'composite', executor })
  })
  afterAll(() => db?.close())

  it('are the tables primary keys, and checkSchema finds nothing to report', async () => {
    expect(await db.orm.checkSchema()).toEqual([])
    const rows = (await db.sql`
      select c.relname as table, array_agg(a.attname::text order by k.n)::text as columns
      from pg_index i join pg_class c on c.oid = i.indrelid
      cross join lateral unnest(i.indkey) with ordinality as k(attnum, n)
      join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
      where i.indisprimary and c.relname in ('enrollment', 'translation') group by c.relname order by c.relname`) as unknown as { table: string; columns: string }[]
    expect(rows).toEqual([
      { table: 'enrollment', columns: '{student_id,course_code,term}' },
      { table: 'translation', columns: '{course_code,lang}' },
    ])
  })

  it('create, load, ref, find and populate by the tuple, in one round trip per flush', async () => {
    const em = db.orm.em()
    // A fresh Flushwave's id pool is empty: the students get their ids in the flush, and the
    // enrollments' keys are composed there too.
    const ann = em.create('Student', { name: 'Ann' })
    const bob = em.create('Student', { name: 'Bob' })
    const fr = em.create('Course', { code: 'FR-101', title: 'French' })
    const de = em.create('Course', { code: 'DE-101', title: 'German' })
    const e1 = em.create('Enrollment', { student: ann, course: fr, term: 'fall' })
    em.create('Enrollment', { student: ann, course: de, term: ODD, grade: 3 })
    em.create('Enrollment', { student: bob, course: fr, term: 'fall', note: 'late' })
    em.create('Translation', { course: fr, lang: 'de', title: 'Französisch' })
    em.create('Translation', { course: fr, lang: 'fr', title: 'Français' })
    expect(em.idOf(e1)).toBeUndefined()
    const created = await em.flush()
    expect(created.inserted).toMatchObject({ enrollment: 3, translation: 2 })
    expect(created.waves).toBe(1)
    expect(em.idOf(e1)).toEqual({ student: ann.id, course: 'FR-101', term: 'fall' })
    expect(e1.note).toBe('none') // the server's default, read back by the insert
    expect(e1.version).toBe(1)

    const em2 = db.orm.em()
    const [byIds, byEntities] = await Promise.all([
      em2.load('Enrollment', { student: ann.id, course: 'DE-101', term: ODD }),
      em2.load('Enrollment', { student: em2.ref('Student', bob.id), course: em2.ref('Course', 'FR-101'), term: 'fall' }),
    ])
    expect(byIds.grade).toBe(3)
    expect(byIds.term).toBe(ODD)
    expect(byEntities.note).toBe('late')
    expect(byEntities.student).toBe(em2.ref('Student', bob.id))
    // One statement loaded both (loads in one tick share it).
    expect(em2.ref('Enrollment', { student: ann.id, course: 'DE-101', term: ODD })).toBe(byIds)
    await expect(em2.load('Enrollment', { student: ann.id, course: 'DE-101', term: 'spring' })).rejects.toBeInstanceOf(NotFoundError)

    const fall = await em2.find('Enrollment', { term: 'fall' }, { orderBy: { student: 'asc' } })
    expect(fall.map((e) => em2.idOf(e))).toEqual([
      { student: ann.id, course: 'FR-101', term: 'fall' },
      { student: bob.id, course: 'FR-101', term: 'fall' },
    ])
    expect(await em2.count('Enrollment', { course: { title: 'French' } })).toBe(2)
    const students = await em2.find('Student', { enrollments: { some: { term: ODD } } }, { populate: ['enrollments.course'] })
    expect(students.map((s) => s.name)).toEqual(['Ann'])
    expect(
      students[0]!.enrollments.items
        .map((e) => e.course.title)
        .sort(),
    ).toEqual(['French', 'German'])
    // An enrollment read by its key is in its student's collection, also when the collections of
    // its type were indexed before it came (by Bob's, here).
    const em3 = db.orm.em()
    const bobThere = em3.ref('Student', bob.id)
    await em3.populate(bobThere, 'enrollments')
    expect(bobThere.enrollments.items.length).toBe(1)
    const read = await em3.load('Enrollment', { student: ann.id, course: 'DE-101', term: ODD })
    const annThere = em3.ref('Student', ann.id)
    await em3.populate(annThere, 'enrollments')
    expect(annThere.enrollments.items.length).toBe(2)
    expect(annThere.enrollments.has(read)).toBe(true)
    const french = await em2.load('Course', 'FR-101')
    await em2.populate(french, 'translations')
    expect(french.translations.items.map((tr) => tr.title).sort()).toEqual(['Französisch', 'Français'])

    const page1 = await em2.findPage('Enrollment', {}, { first: 2, orderBy: { course: 'desc' } })
    const page2 = await em2.findPage('Enrollment', {}, { first: 2, orderBy: { course: 'desc' }, after: page1.endCursor! })
    expect([...page1.items, ...page2.items].map((e) => `${e.course.code}/${e.student.id}/${e.term}`)).toEqual(
      [`FR-101/${ann.id}/fall`, `FR-101/${bob.id}/fall`, `DE-101/${ann.id}/${ODD}`],
    )
    expect(page2.hasNextPage).toBe(false)

    const rows = await em2.findBySql('Enrollment', raw`select * from enrollment where term = ${ODD}`)
    expect(rows).toEqual([byIds])
  })

  it('updates and deletes by the tuple: one row, several rows, versioned, and a cascade', async () => {
    const em = db.orm.em()
    const cy = em.create('Student', { name: 'Cy' })
    const dee = em.create('Student', { name: 'Dee' })
    const course = em.create('Course', { code: 'IT-101', title: 'Italian' })
    for (const s of [cy, dee]) for (const term of ['spring', ODD]) em.create('Enrollment', { student: s, course, term })
    await em.flush()

    const em2 = db.orm.em()
    const mine = await em2.find('Enrollment', { course: 'IT-101' }, { orderBy: { student: 'asc', term: 'asc' } })
    expect(mine).toHaveLength(4)
    mine[0]!.grade = 5
    db.queries.length = 0
    const one = await em2.flush()
    expect(one.updated).toEqual({ enrollment: 1 })
    expect(db.writes().filter((q) => /^update|^with/.test(q.text))).toHaveLength(1)
    for (const e of mine) e.grade = (e.grade ?? 0) + 1
    const several = await em2.flush()
    expect(several.updated).toEqual({ enrollment: 4 })
    expect(several.statements).toBe(1) // one versioned UPDATE
    expect(mine.map((e) => e.version)).toEqual([3, 2, 2, 2])
    // The versioned UPDATE returned each row's generated label with its new grade.
    expect(mine.map((e) => e.label)).toEqual([`${ODD} 6`, 'spring 1', `${ODD} 1`, 'spring 1'])
    const grades = (await db.sql`select grade, version from enrollment where course_code = 'IT-101' order by student_id, term`) as unknown as { grade: number; version: number }[]
    expect(grades).toEqual([{ grade: 6, version: 3 }, { grade: 1, version: 2 }, { grade: 1, version: 2 }, { grade: 1, version: 2 }])

    // A stale version fails the flush and names the row by its key.
    const stale = db.orm.em()
    const old = await stale.load('Enrollment', { student: cy.id, course: 'IT-101', term: ODD })
    mine[0]!.grade = 9
    await em2.flush()
    old.grade = 0
    const error = await stale.flush().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OptimisticLockError)
    expect((error as OptimisticLockError).ids).toEqual([`{"${cy.id}","IT-101","${ODD.replace(/[\\"]/g, '\\$&')}"}`])

    // The key cannot change.
    expect(() => ((mine[0] as { term: string }).term = 'summer')).toThrow(InvalidValueError)
    expect(() => em2.assign(mine[0]!, { course: em2.ref('Course', 'FR-101') } as never)).toThrow(InvalidValueError)

    em2.remove(mine[2]!)
    const removed = await em2.flush()
    expect(removed.deleted).toEqual({ enrollment: 1 })
    // Removing the student cascades, on the server, to its enrollments, and the loaded one goes.
    em2.remove(await em2.load('Student', cy.id))
    const cascaded = await em2.flush()
    expect(cascaded.deleted).toMatchObject({ student: 1, enrollment: 2 })
    // Both of Cy's enrollments held here went with the row (the server's cascade said which).
    expect([stateOf(mine[0])!.status, stateOf(mine[1])!.status, stateOf(mine[3])!.status]).toEqual(['detached', 'detached', 'managed'])
    expect(await em2.tryLoad('Enrollment', { student: cy.id, course: 'IT-101', term: 'spring' })).toBeUndefined()
    expect(await db.sql`select student_id from enrollment where course_code = 'IT-101'`).toEqual([{ student_id: String(dee.id) }])

    // Several removed at once, versioned.
    const left = await db.orm.em().find('Enrollment', { course: 'IT-101' })
    const em3 = db.orm.em()
    for (const e of await em3.find('Enrollment', { course: 'IT-101' })) em3.remove(e)
    expect((await em3.flush()).deleted).toEqual({ enrollment: left.length })
  })

  it('upsert on the primary key, and a removed key taken again in the same flush', async () => {
    const em = db.orm.em()
    const eve = em.create('Student', { name: 'Eve' })
    const course = em.create('Course', { code: 'ES-101', title: 'Spanish' })
    await em.flush()
    const em2 = db.orm.em()
    const first = em2.upsert('Enrollment', { student: em2.ref('Student', eve.id), course: em2.ref('Course', 'ES-101'), term: 'fall', grade: 2 }, { onConflict: ['student', 'course', 'term'] })
    await em2.flush()
    expect(first.version).toBe(1)
    const em3 = db.orm.em()
    const again = em3.upsert('Enrollment', { student: em3.ref('Student', eve.id), course: em3.ref('Course', course.code), term: 'fall', grade: 4 }, { onConflict: ['term', 'course', 'student'] })
    const result = await em3.flush()
    expect(result.upserted).toEqual({ enrollment: 1 })
    expect(again.grade).toBe(4)
    expect(again.version).toBe(2)
    expect(em3.idOf(again)).toEqual({ student: eve.id, course: 'ES-101', term: 'fall' })

    // Remove a row and create one with its key: the delete goes first.
    em3.remove(again)
    const replacement = em3.create('Enrollment', { student: em3.ref('Student', eve.id), course: em3.ref('Course', 'ES-101'), term: 'fall', grade: 1 })
    await em3.flush()
    expect(replacement.version).toBe(1)
    expect(await db.sql`select grade from enrollment where course_code = 'ES-101'`).toEqual([{ grade: 1 }])
  })

  it('soft-deletes a composite-key row, and hard cascades from its parent', async () => {
    const em = db.orm.em()
    const course = em.create('Course', { code: 'PT-101', title: 'Portuguese' })
    em.create('Translation', { course, lang: 'en', title: 'Portuguese' })
    em.create('Translation', { course, lang: 'pt', title: 'Português' })
    await em.flush()
    const em2 = db.orm.em()
    const en = await em2.load('Translation', { course: 'PT-101', lang: 'en' })
    em2.remove(en)
    await em2.flush()
    expect(en.deletedAt).toBeInstanceOf(Date)
    const em3 = db.orm.em()
    expect((await em3.find('Translation', { course: 'PT-101' })).map((tr) => tr.lang)).toEqual(['pt'])
    expect(await em3.tryLoad('Translation', { course: 'PT-101', lang: 'en' })).toBeUndefined()
    expect((await em3.load('Translation', { course: 'PT-101', lang: 'en' }, { withDeleted: true })).title).toBe('Portuguese')
    em3.remove(await em3.load('Course', 'PT-101'))
    expect((await em3.flush()).deleted).toMatchObject({ course: 1, translation: 2 })
  })

  it('refuses what would break a key before anything is sent', async () => {
    const em = db.orm.em()
    const fin = em.create('Course', { code: 'FI-101', title: 'Finnish' })
    const gus = em.create('Student', { name: 'Gus' })
    await em.flush()
    em.create('Enrollment', { student: gus, course: fin, term: 'fall' })
    expect(() => em.create('Enrollment', { student: gus, course: fin, term: 'fall' })).toThrow(EntityStateError)
    await expect(em.load('Enrollment', { student: gus.id, course: 'FI-101' } as never)).rejects.toBeInstanceOf(InvalidValueError)
    expect(() => em.ref('Enrollment', { student: gus.id, course: 'FI-101', term: 'x', grade: 1 } as never)).toThrow(InvalidValueError)
    expect(() => em.ref('Enrollment', 7 as never)).toThrow(InvalidValueError)
    expect(() => em.ref('Enrollment', { student: 'x', course: 'FI-101', term: 'x' } as never)).toThrow(InvalidValueError)
    // Two new enrollments of one new student (its id maybe not known until the flush) with one key.
    const em4 = db.orm.em()
    const hal = em4.create('Student', { name: 'Hal' })
    const twice = () => em4.create('Enrollment', { student: hal, course: em4.ref('Course', 'FI-101'), term: 'fall' })
    const sentBefore = db.queries.length
    await expect(
      (async () => {
        twice()
        twice()
        await em4.flush()
      })(),
    ).rejects.toBeInstanceOf(EntityStateError)
    expect(db.queries.slice(sentBefore).filter((q) => q.phase === 'write')).toEqual([])
    // A key the database holds already: the server refuses it, and nothing is committed.
    const em2 = db.orm.em()
    const s = em2.ref('Student', gus.id)
    em2.create('Enrollment', { student: s, course: em2.ref('Course', 'FI-101'), term: 'spring' })
    await em2.flush()
    const em3 = db.orm.em()
    em3.create('Enrollment', { student: em3.ref('Student', gus.id), course: em3.ref('Course', 'FI-101'), term: 'spring' })
    const sent = db.queries.length
    await expect(em3.flush()).rejects.toBeInstanceOf(UniqueViolationError)
    expect(db.queries.length).toBeGreaterThan(sent)
  })
})

describe.each(ALL_EXECUTORS)('a uuid in a composite key on %s', (executor) => {
  let db: TestDatabase<typeof schema.defs>
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'composite_uuid', executor })
  })
  afterAll(() => db?.close())

  it('is keyed in the form the server returns, whatever case it was given in', async () => {
    const em = db.orm.em()
    const upper = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'
    const tagging = em.create('Tagging', { token: upper, lang: 'en' })
    await em.flush()
    // The insert returned the server's default for the row it found by its key.
    expect(tagging.note).toBe('none')
    expect(await em.load('Tagging', { token: upper.toLowerCase(), lang: 'en' })).toBe(tagging)
    expect(em.ref('Tagging', { token: upper, lang: 'en' })).toBe(tagging)
    expect(() => em.create('Tagging', { token: upper.toLowerCase(), lang: 'en' })).toThrow(EntityStateError)
  })
})

describe('composite primary key definitions', () => {
  const base = {
    A: entity('a', { id: t.id(), name: t.text() }),
  }
  it('refuse what cannot be a key or refer to one', () => {
    const bad = (props: Record<string, never>, primaryKey: readonly string[]) => () =>
      defineSchema({ ...base, K: entity('k', props as never, { primaryKey: primaryKey as never }) })
    expect(bad({ a: t.manyToOne('A').nullable(), n: t.text() } as never, ['a', 'n'])).toThrow(/nullable/)
    expect(bad({ a: t.manyToOne('A'), n: t.jsonb() } as never, ['a', 'n'])).toThrow(/jsonb column/)
    expect(bad({ a: t.manyToOne('A'), n: t.text() } as never, ['a', 'x'])).toThrow(/not a column/)
    expect(bad({ a: t.manyToOne('A'), n: t.text() } as never, [])).toThrow(/one property or more/)
    expect(bad({ id: t.id(), n: t.text() } as never, ['n'])).toThrow(/one or the other/)
    expect(bad({ a: t.manyToOne('A'), n: t.text().serverDefault() } as never, ['a', 'n'])).toThrow(/server fills/)
    expect(() =>
      defineSchema({
        ...base,
        K: entity('k', { a: t.manyToOne('A'), n: t.text() }, { primaryKey: ['a', 'n'] }),
        R: entity('r', { id: t.id(), k: t.manyToOne('K') }),
      }),
    ).toThrow(SchemaError)
    expect(() =>
      defineSchema({
        ...base,
        K: entity('k', { a: t.manyToOne('A'), n: t.text(), as: t.manyToMany('A') }, { primaryKey: ['a', 'n'] }),
      }),
    ).toThrow(/many-to-many/)
  })
})
