/**
 * Primary keys other than int8 and uuid, on every executor: int4 keys filled from their sequence
 * (serial), and natural keys the application chooses (text, varchar(n), int4), referred to by
 * many-to-ones, one-to-manys and a join table, through every operation that takes a key: create,
 * load, ref, find, populate, update, upsert, delete and its cascade. The tables are the ones
 * createTablesSql makes, and checkSchema finds nothing to report on them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, t } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

const schema = defineSchema({
  Country: entity('country', {
    code: t.providedId(t.varchar(2)),
    name: t.text(),
    cities: t.oneToMany('City', 'country'),
  }),
  City: entity('city', {
    id: t.id(t.integer()),
    name: t.text(),
    country: t.manyToOne('Country').onDelete('cascade'),
    tags: t.manyToMany('Label'),
  }),
  Label: entity('label', {
    slug: t.providedId(t.text()),
    title: t.text(),
  }),
  Visit: entity('visit', {
    number: t.providedId(t.integer()),
    city: t.manyToOne('City').onDelete('cascade'),
    label: t.manyToOne('Label').nullable(),
  }),
})

describe.each(ALL_EXECUTORS)('keys of int4, varchar, text and provided int4 on %s', (executor) => {
  let db: TestDatabase<typeof schema.defs>
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'keytypes', executor })
  })
  afterAll(() => db?.close())

  it('match the tables createTablesSql made', async () => {
    expect(await db.orm.checkSchema()).toEqual([])
    const [{ type }] = (await db.sql`select format_type(atttypid, atttypmod) as type from pg_attribute where attrelid = 'country'::regclass and attname = 'code'`) as unknown as [{ type: string }]
    expect(type).toBe('character varying(2)')
  })

  it('create, load, ref, find, populate, update, upsert, delete and cascade, each keyed by its own type', async () => {
    const em = db.orm.em()
    const fr = em.create('Country', { code: 'FR', name: 'France' })
    const jp = em.create('Country', { code: 'JP', name: 'Japan' })
    const sea = em.create('Label', { slug: 'by-the-sea', title: 'By the sea' })
    const old = em.create('Label', { slug: 'old "town"', title: 'Old town' })
    const nice = em.create('City', { name: 'Nice', country: fr })
    const kyoto = em.create('City', { name: 'Kyoto', country: jp })
    nice.tags.add(sea)
    nice.tags.add(old)
    kyoto.tags.add(old)
    em.create('Visit', { number: 7, city: nice, label: sea })
    em.create('Visit', { number: 2 ** 31 - 1, city: kyoto, label: null })
    const created = await em.flush()
    expect(created.roundTrips).toBeLessThanOrEqual(2)
    expect(typeof nice.id).toBe('number')
    const [row] = (await db.sql`select pg_typeof(id)::text as type from city limit 1`) as unknown as [{ type: string }]
    expect(row.type).toBe('integer')

    const em2 = db.orm.em()
    const [france, city, label, visit] = await Promise.all([
      em2.load('Country', 'FR'),
      em2.load('City', nice.id),
      em2.load('Label', 'old "town"'),
      em2.load('Visit', 7),
    ])
    expect(france.name).toBe('France')
    expect(city.country).toBe(france)
    expect(label.title).toBe('Old town')
    expect(visit.city).toBe(city)
    expect((await em2.find('City', { country: 'JP' })).map((c) => c.name)).toEqual(['Kyoto'])
    expect((await em2.find('City', { country: { code: { in: ['FR', 'XX'] } } })).map((c) => c.name)).toEqual(['Nice'])
    expect(await em2.count('City', { tags: { some: { slug: 'by-the-sea' } } })).toBe(1)
    await em2.populate(france, 'cities.tags')
    expect(france.cities.items.map((c) => c.name)).toEqual(['Nice'])
    expect(city.tags.items.map((l) => l.slug).sort()).toEqual(['by-the-sea', 'old "town"'])

    // An update, a reference by key, and an upsert over a provided key.
    france.name = 'République française'
    em2.ref('Visit', 2 ** 31 - 1).label = em2.ref('Label', 'by-the-sea')
    em2.upsert('Label', { slug: 'by-the-sea', title: 'Seaside' }, { onConflict: 'slug' })
    em2.upsert('Label', { slug: 'new', title: 'New' }, { onConflict: 'slug' })
    await em2.flush()
    const rows = await db.sql`select (select name from country where code = 'FR') as country, (select label_slug from visit where number = ${2 ** 31 - 1}) as label, (select string_agg(slug || '=' || title, ',' order by slug) from label) as labels`
    expect(rows[0]).toEqual({ country: 'République française', label: 'by-the-sea', labels: 'by-the-sea=Seaside,new=New,old "town"=Old town' })

    // Deleting a country cascades to its cities, their visits and their links.
    const em3 = db.orm.em()
    em3.remove(em3.ref('Country', 'JP'))
    const removed = await em3.flush()
    expect(removed.deleted).toMatchObject({ country: 1 })
    const left = await db.sql`select (select count(*)::int from city) as cities, (select count(*)::int from visit) as visits, (select count(*)::int from city_label) as links`
    expect(left[0]).toEqual({ cities: 1, visits: 1, links: 2 })
  })

  it('refuses a key of the wrong type before anything is sent', async () => {
    const em = db.orm.em()
    expect(() => em.create('Country', { code: 'FRA', name: 'too long' })).toThrow(/at most 2 characters/)
    expect(() => em.create('Visit', { number: 2 ** 31, city: em.ref('City', 1) })).toThrow(/integer between/)
    await expect(em.load('Country', 42 as never)).rejects.toThrow(/expected a string/)
    expect(() => em.ref('City', 'one' as never)).toThrow(/integer/)
  })
})
