import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, t } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

const schema = defineSchema({
  Sample: entity('sample', {
    id: t.id(),
    text: t.text().nullable(),
    integer: t.integer().nullable(),
    big: t.bigint().nullable(),
    amount: t.numeric().nullable(),
    flag: t.boolean().nullable(),
    at: t.timestamptz().nullable(),
    doc: t.jsonb<{ a: number[]; s: string } | string>().nullable(),
    ref: t.uuid().nullable(),
    mood: t.enum('mood', ['calm', 'odd "quoted", value']).nullable(),
  }),
})

let db: TestDatabase<typeof schema.defs>
beforeAll(async () => {
  db = await testDatabase(schema, { name: 'types' })
})
afterAll(() => db.close())

const tricky = `a "quoted", {braced} \\ back\\slash, NULL, 'single', émoji 🚀, tab\t, newline\n`

describe('column types', () => {
  it('write and read back every type, nulls and awkward text included', async () => {
    const values = {
      text: tricky,
      integer: -(2 ** 31),
      big: 2n ** 62n,
      amount: '12345678901234567890.000000001',
      flag: false,
      at: new Date('2026-11-21T23:45:59.123Z'),
      doc: { a: [1, 2, 3], s: tricky },
      ref: '0190f3a1-7b7c-7cde-8f00-123456789abc',
      mood: 'odd "quoted", value' as const,
    }
    const em = db.orm.em()
    const full = em.create('Sample', values)
    const empty = em.create('Sample', {})
    const jsonString = em.create('Sample', { doc: 'just a string' })
    await em.flush()

    const em2 = db.orm.em()
    const [a, b, c] = await Promise.all([full, empty, jsonString].map((s) => em2.load('Sample', s.id)))
    expect(a).toMatchObject({ id: full.id, ...values })
    expect(b).toMatchObject({ id: empty.id, text: null, integer: null, big: null, amount: null, flag: null, at: null, doc: null, ref: null, mood: null })
    expect(c!.doc).toBe('just a string')

    // Unchanged values (in text form) are not written again; a changed one is, alone.
    db.queries.length = 0
    a!.at = new Date(values.at.getTime())
    a!.doc = { a: [1, 2, 3], s: tricky }
    expect((await em2.flush()).statements).toBe(0)
    ;(a!.doc as { a: number[] }).a.push(4)
    a!.at!.setUTCFullYear(2030)
    const result = await em2.flush()
    expect(result.updated).toEqual({ sample: 1 })
    const [row] = await db.sql`select doc, at from sample where id = ${full.id}`
    expect(row!.doc).toEqual({ a: [1, 2, 3, 4], s: tricky })
    expect((row!.at as Date).toISOString()).toBe('2030-11-21T23:45:59.123Z')
  })

  it('finds by every comparable type', async () => {
    const em = db.orm.em()
    const s = em.create('Sample', { text: 'findable', big: 7n, amount: '1.5', flag: true, at: new Date(0), ref: '0190f3a1-7b7c-7cde-8f00-000000000001', mood: 'calm' })
    await em.flush()
    const em2 = db.orm.em()
    for (const where of [{ big: 7n }, { amount: { gte: '1.4' } }, { flag: true }, { at: new Date(0) }, { ref: s.ref! }, { mood: 'calm' as const }, { text: { like: 'find%' } }]) {
      const found = await em2.find('Sample', { ...where, id: s.id })
      expect(found.map((x) => x.id), JSON.stringify(where, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))).toEqual([s.id])
    }
  })

  it('stores every millisecond exactly, on insert and on update, from year 1 to 9999 and before 1970', async () => {
    const min = new Date('0001-01-01T00:00:00.000Z').getTime()
    const max = new Date('9999-12-31T23:59:59.999Z').getTime()
    // A seeded walk over the whole range, plus the edges and the instants around the epoch.
    let seed = 20_261_122
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31)
    const times = [min, max, -1, 0, 1, -999, -1000, -1001, 999, 1000, 1001, ...Array.from({ length: 500 }, () => Math.floor(min + random() * (max - min)))]
    const em = db.orm.em()
    const rows = times.map((time) => em.create('Sample', { at: new Date(time) }))
    await em.flush()
    const read = async () =>
      new Map((await db.sql`select id, to_json(at) #>> '{}' as at from sample where id = any(${rows.map((r) => r.id)}::int8[])`).map((r) => [Number(r.id), new Date(r.at as string).getTime()]))
    const inserted = await read()
    expect(rows.map((r) => inserted.get(r.id))).toEqual(times)
    // The same values through an update: each row takes its neighbour's time.
    rows.forEach((r, i) => (r.at = new Date(times[(i + 1) % times.length]!)))
    await em.flush()
    const updated = await read()
    expect(rows.map((r) => updated.get(r.id))).toEqual(times.map((_, i) => times[(i + 1) % times.length]))
  })

  it('stores a time shared by every row of a statement exactly, sent once, on insert and on update', async () => {
    const read = async (ids: number[]) =>
      (await db.sql`select to_json(at) #>> '{}' as at from sample where id = any(${ids}::int8[]) order by id`).map((r) => (r.at === null ? null : new Date(r.at as string).getTime()))
    // The time goes as one scalar `$n::timestamptz` (no array of times): the value of that $n.
    const timeParams = () =>
      db.writes().flatMap((q) => {
        if (!q.text.includes('"at"')) return []
        const scalars = [...q.text.matchAll(/\$(\d+)::timestamptz(?!\[)/g)].map((m) => Number(m[1]))
        expect(scalars).toHaveLength(1)
        return [q.params[scalars[0]! - 1]]
      })
    for (const time of [new Date('0001-01-01T00:00:00.000Z').getTime(), -1001, 0, 1_795_372_200_123, new Date('9999-12-31T23:59:59.999Z').getTime()]) {
      const em = db.orm.em()
      db.queries.length = 0
      // Distinct Date objects, one time: the insert sends it once, as a scalar in timestamptz's own text.
      const rows = [1, 2, 3].map(() => em.create('Sample', { at: new Date(time), text: 'shared' }))
      await em.flush()
      expect(timeParams()).toEqual([new Date(time).toISOString()])
      expect(await read(rows.map((r) => r.id))).toEqual([time, time, time])
      // Rows without a time share a null.
      db.queries.length = 0
      const unset = [1, 2].map(() => em.create('Sample', { text: 'no time' }))
      await em.flush()
      expect(timeParams()).toEqual([null])
      expect(await read(unset.map((r) => r.id))).toEqual([null, null])
      // An update where two rows set one time and a third changes only its text: the third keeps its time.
      db.queries.length = 0
      const later = time === 253_402_300_799_999 ? time - 7 : time + 7
      rows[0]!.at = new Date(later)
      rows[1]!.at = new Date(later)
      rows[2]!.text = 'changed'
      await em.flush()
      expect(timeParams()).toEqual([new Date(later).toISOString()])
      expect(await read(rows.map((r) => r.id))).toEqual([later, later, time])
    }
  })
})
