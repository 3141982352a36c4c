import { describe, expect, it } from 'vitest'
import { insertsOf, type LinkChange } from '../../src/plan/changes.js'
import { tableOf } from '../../src/plan/ops.js'
import { planFlush } from '../../src/plan/planner.js'
import { arrayLiteral } from '../../src/sql/array-literal.js'
import { renderOp, renderPlan } from '../../src/sql/render-write.js'
import { EXACT_UPDATE_SHAPES } from '../../src/sql/render-update.js'
import { defineSchema, entity, t } from '../../src/index.js'
import type { EntityMeta } from '../../src/schema/meta.js'
import type { SchemaFacts } from '../../src/schema/derive.js'
import { bookstore } from '../support/bookstore.js'
import { bookstoreUuid } from '../support/bookstore-uuid.js'

const Author = bookstore.meta('Author')
const Book = bookstore.meta('Book')
const Tag = bookstore.meta('Tag')
const UuidTag = bookstoreUuid.meta('Tag')
const empty = { inserts: [], upserts: [], updates: [], deletes: [], linkAdds: [], linkRemoves: [] }

describe('array literals', () => {
  it('quotes every element so no text can change the array', () => {
    expect(arrayLiteral(['a', null, 'NULL', 'x,y', '{}', 'say "hi"', 'back\\slash', ''])).toBe(
      '{"a",NULL,"NULL","x,y","{}","say \\"hi\\"","back\\\\slash",""}',
    )
    expect(arrayLiteral([])).toBe('{}')
  })

  it('is the same literal whether or not an element needs a NULL or an escape (two ways of building it)', () => {
    // Nothing to escape and no NULL: built with join. One element that needs either: element by element.
    expect(arrayLiteral(['a b', '', '{x}', 'NULL', 'x,y'])).toBe('{"a b","","{x}","NULL","x,y"}')
    expect(arrayLiteral(['a b', '', '{x}', 'NULL', 'x,y', null])).toBe('{"a b","","{x}","NULL","x,y",NULL}')
    expect(arrayLiteral(['a b', '', '{x}', 'NULL', 'x,y', 'q"'])).toBe('{"a b","","{x}","NULL","x,y","q\\""}')
    expect(arrayLiteral(['a b', '', '{x}', 'NULL', 'x,y', 'b\\'])).toBe('{"a b","","{x}","NULL","x,y","b\\\\"}')
    expect(arrayLiteral(['1', '2'], 'int4')).toBe('{1,2}')
    expect(arrayLiteral([''])).toBe('{""}')
  })

  it('leaves elements of integer, boolean and uuid types bare, and quotes every other type', () => {
    expect(arrayLiteral(['1', null, '-42'], 'int8')).toBe('{1,NULL,-42}')
    expect(arrayLiteral(['t', 'f'], 'bool')).toBe('{t,f}')
    expect(arrayLiteral(['0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b'], 'uuid')).toBe('{0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b}')
    // Text that looks like a number (or holds a comma) is still quoted: only the type decides.
    expect(arrayLiteral(['1', '1,2', 'NULL'], 'text')).toBe('{"1","1,2","NULL"}')
    expect(arrayLiteral(['1.5'], 'numeric')).toBe('{"1.5"}')
  })
})

describe('write statements', () => {
  it('render an insert whose text depends on whether it writes one row or more, never on how many', () => {
    const tags = (n: number) => Array.from({ length: n }, (_, i) => ({ entity: Tag, id: String(i + 1), values: [String.fromCharCode(97 + i)] }))
    const [one, two, three] = [1, 2, 3].map((n) => renderPlan(planFlush({ ...empty, inserts: insertsOf(tags(n)) }, bookstore))[0]![0]!)
    expect(two!.text).toBe('insert into "tag" ("id", "name") select * from unnest($1::int8[], $2::text[])')
    expect(three!.text).toBe(two!.text)
    // Ids go bare (int8); text stays quoted.
    expect(two!.params).toEqual(['{1,2}', '{"a","b"}'])
    // One row: scalar binds, no arrays; the id's test makes a row of nulls insert nothing.
    expect(one!.text).toBe('insert into "tag" ("id", "name") select $1::int8, $2::text where $1::int8 is not null')
    expect(one!.params).toEqual(['1', 'a'])
  })

  it('render an insert that leaves server-filled columns out and returns them, a text per set of omitted columns', () => {
    const served = defineSchema({
      Note: entity('note', { id: t.id(), body: t.text(), at: t.timestamptz().serverDefault('now()'), n: t.integer().serverDefault('1'), len: t.integer().generated('length(body)') }),
    })
    const Note = served.meta('Note')
    expect(Note.serverValued).toEqual([1, 2, 3])
    const rows = (n: number, omit: number[]) => ({ entity: Note, ids: Array.from({ length: n }, (_, i) => String(i + 1)), columns: Note.fields.map((_, i) => (omit.includes(i) ? [] : Array.from({ length: n }, () => '5'))), omit })
    const [one, two] = [1, 2].map((n) => renderPlan(planFlush({ ...empty, inserts: [rows(n, [1, 3])] }, served))[0]![0]!)
    expect(one!.text).toBe('insert into "note" as t ("id", "body", "n") select $1::int8, $2::text, $3::int4 where $1::int8 is not null returning t."id"::text, floor(extract(epoch from t."at") * 1000), t."len"')
    expect(one!.params).toEqual(['1', '5', '5'])
    expect(one!.returnsRows).toBe(true)
    expect(two!.text).toBe('insert into "note" as t ("id", "body", "n") select * from unnest($1::int8[], $2::text[], $3::int4[]) returning t."id"::text, floor(extract(epoch from t."at") * 1000), t."len"')
    expect(two!.params).toEqual(['{1,2}', '{"5","5"}', '{5,5}'])
    // Only the generated column left out: the Date is written, in the shared form when the rows share it.
    const dated = renderPlan(planFlush({ ...empty, inserts: [rows(2, [3])] }, served))[0]![0]!
    expect(dated.text).toBe(
      'insert into "note" as t ("id", "body", "at", "n") select d.c0, d.c1, $3::timestamptz, d.c3 from unnest($1::int8[], $2::text[], $4::int4[]) as d(c0, c1, c3) returning t."id"::text, t."len"',
    )
    // An update never writes the generated column, and returns it: it may change with its inputs.
    const update = renderPlan(planFlush({ ...empty, updates: [{ entity: Note, id: '1', changed: new Map([[0, 'b']]) }] }, served))[0]![0]!
    expect(update.text).toBe('update "note" as t set "body" = $2::text where t."id" = $1::int8 returning t."id"::text, t."len"')
    expect(update.returnsRows).toBe(true)
  })

  it('render an insert whose Dates travel as epoch milliseconds in arrays, decoded by name, and as text where one value stands for every row', () => {
    const at = new Date('2026-11-22T18:30:00.123Z').getTime()
    const row = (id: string, time: number) => ({ entity: Author, id, values: ['Ann', null, '0', String(time)] })
    const [differ, share, one] = [[row('7', at), row('8', at + 1)], [row('7', at), row('8', at)], [row('7', at)]].map(
      (inserts) => renderPlan(planFlush({ ...empty, inserts: insertsOf(inserts) }, bookstore))[0]![0]!,
    )
    const decode = (x: string) => `(timestamptz 'epoch' + (${x} / 1000) * interval '1 second' + (${x} % 1000) * interval '1 millisecond')`
    expect(differ!.text).toBe(
      'insert into "author" ("id", "name", "email", "rating", "created_at") ' +
        `select d.c0, d.c1, d.c2, d.c3, ${decode('d.c4')} ` +
        'from unnest($1::int8[], $2::text[], $3::text[], $4::numeric[], $5::int8[]) as d(c0, c1, c2, c3, c4)',
    )
    expect(differ!.params).toEqual(['{7,8}', '{"Ann","Ann"}', '{NULL,NULL}', '{"0","0"}', '{1795372200123,1795372200124}'])
    // One time for every row: sent once, as a scalar in the column's own text, not unnested.
    expect(share!.text).toBe(
      'insert into "author" ("id", "name", "email", "rating", "created_at") ' +
        'select d.c0, d.c1, d.c2, d.c3, $5::timestamptz ' +
        'from unnest($1::int8[], $2::text[], $3::text[], $4::numeric[]) as d(c0, c1, c2, c3)',
    )
    expect(share!.params).toEqual(['{7,8}', '{"Ann","Ann"}', '{NULL,NULL}', '{"0","0"}', '2026-11-22T18:30:00.123Z'])
    expect(one!.text).toBe(
      'insert into "author" ("id", "name", "email", "rating", "created_at") ' +
        'select $1::int8, $2::text, $3::text, $4::numeric, $5::timestamptz where $1::int8 is not null',
    )
    expect(one!.params).toEqual(['7', 'Ann', null, '0', '2026-11-22T18:30:00.123Z'])
  })

  it('render a one-row update and delete with scalar binds', () => {
    const statements = renderPlan(
      planFlush({ ...empty, updates: [{ entity: Tag, id: '5', changed: new Map([[0, 'x']]) }], deletes: [{ entity: Tag, id: '6' }] }, bookstore),
    )[0]!
    const [update, remove] = (['update', 'delete'] as const).map((kind) => statements.find((s) => s.op.kind === kind))
    expect(update!.text).toBe('update "tag" set "name" = $2::text where "id" = $1::int8')
    expect(update!.params).toEqual(['5', 'x'])
    expect(remove!.text).toBe('delete from "tag" where "id" = $1::int8')
    expect(remove!.params).toEqual(['6'])
  })

  it("plans a table's updates in one UPDATE, or one per `after` pass in order when rows pass unique values on", () => {
    const row = (id: string, name: string, after?: number) => ({ entity: Tag, id, changed: new Map([[0, name]]), ...(after === undefined ? {} : { after }) })
    const ids = (updates: ReturnType<typeof row>[]) =>
      planFlush({ ...empty, updates }, bookstore).waves[0]!.ops.map((op) => (op.kind === 'update' || op.kind === 'lock' ? `${op.kind} ${op.ids.join(',')}` : op.kind))
    expect(ids([row('1', 'a'), row('2', 'b')])).toEqual(['update 1,2'])
    // 3 takes what 1 gives up, 1 what 2 gives up; 4 is on its own. Passes write rows out of id
    // order, so every row is locked first, in id order (10 after 9: by value, not as text).
    expect(ids([row('3', 'x', 2), row('1', 'y', 1), row('4', 'z'), row('2', 'w')])).toEqual(['lock 1,2,3,4', 'update 2,4', 'update 1', 'update 3'])
    expect(ids([row('10', 'x', 1), row('9', 'y')])).toEqual(['lock 9,10', 'update 9', 'update 10'])
    const [lock] = renderPlan(planFlush({ ...empty, updates: [row('10', 'x', 1), row('9', 'y')] }, bookstore))[0]!
    expect(lock).toMatchObject({
      text: 'select from unnest($1::int8[]) as a(k) join "tag" as x on x."id" = a.k order by a.k for no key update of x',
      params: ['{9,10}'],
    })
  })

  it('render a one-row update that names only the columns it sets, a shape per set of columns up to a bound per table', () => {
    const one = (entity: EntityMeta, changed: [number, string][], order: SchemaFacts = bookstore) =>
      renderPlan(planFlush({ ...empty, updates: [{ entity, id: '5', changed: new Map(changed) }] }, order))[0]![0]!
    const at = String(Date.parse('2026-11-22T18:30:00.123Z'))
    const both = one(Author, [[3, at], [0, 'Ann']])
    expect(both.text).toBe('update "author" set "name" = $2::text, "created_at" = $3::timestamptz where "id" = $1::int8')
    expect(both.params).toEqual(['5', 'Ann', '2026-11-22T18:30:00.123Z'])
    // Setting null is setting.
    expect(one(Author, [[1, null as unknown as string]])).toMatchObject({ text: 'update "author" set "email" = $2::text where "id" = $1::int8', params: ['5', null] })

    // 8 columns have 255 sets: the first EXACT_UPDATE_SHAPES + 8 get a text each, the rest share
    // the every-column form, whose flags say which columns the row sets.
    const Wide = defineSchema({ Wide: entity('wide', { id: t.id(), ...Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`c${i}`, t.integer()])) }) })
    const wide = Wide.meta('Wide')
    const texts = new Set<string>()
    let last: { text: string; params: readonly (string | null)[] } | undefined
    for (let mask = 1; mask < 256; mask++) {
      last = one(
        wide,
        [0, 1, 2, 3, 4, 5, 6, 7].filter((i) => mask & (1 << i)).map((i) => [i, String(i)]),
        Wide,
      )
      texts.add(last.text)
    }
    expect(texts.size).toBe(EXACT_UPDATE_SHAPES + 8 + 1)
    expect(last!.text).toBe(`update "wide" as t set ${[0, 1, 2, 3, 4, 5, 6, 7].map((i) => `"c${i}" = case when $${2 * i + 3}::bool then $${2 * i + 2}::int4 else t."c${i}" end`).join(', ')} where t."id" = $1::int8`)
    expect(last!.params).toEqual(['5', ...[0, 1, 2, 3, 4, 5, 6, 7].flatMap((i) => [String(i), 't'])])
    // A set seen before keeps its own text.
    expect(one(wide, [[2, '9']], Wide).text).toBe('update "wide" set "c2" = $2::int4 where "id" = $1::int8')
  })

  it('render a multi-row update that names the columns its rows set, flagged only where some rows do not', () => {
    const update = (rows: [string, [number, string | null][]][], entity: EntityMeta = Author, order: SchemaFacts = bookstore) =>
      renderPlan(planFlush({ ...empty, updates: rows.map(([id, changed]) => ({ entity, id, changed: new Map(changed) })) }, order))[0]![0]!
    const some = update([
      ['7', [[0, 'Ann']]],
      ['8', [[1, null]]],
    ])
    expect(some.text).toBe(
      // The rows are locked in id order first (see the lock order tests below). rating and
      // created_at, which no row sets, are not named at all.
      'with d as (select a.* from unnest($1::int8[], $2::text[], $3::bool[], $4::text[], $5::bool[]) ' +
        'as a(k, v1, s1, v2, s2) join "author" as x on x."id" = a.k order by a.k for no key update of x) ' +
        'update "author" as t set ' +
        '"name" = case when d.s1 then d.v1 else t."name" end, ' +
        '"email" = case when d.s2 then d.v2 else t."email" end ' +
        'from d where t."id" = d.k',
    )
    expect(some.params).toEqual(['{7,8}', '{"Ann",NULL}', '{t,f}', '{NULL,NULL}', '{f,t}'])
    // A column every row sets goes without flags.
    const every = update([
      ['7', [[0, 'Ann'], [2, '4.5']]],
      ['8', [[0, 'Bo']]],
    ])
    expect(every.text).toBe(
      'with d as (select a.* from unnest($1::int8[], $2::text[], $3::numeric[], $4::bool[]) ' +
        'as a(k, v1, v3, s3) join "author" as x on x."id" = a.k order by a.k for no key update of x) ' +
        'update "author" as t set "name" = d.v1, "rating" = case when d.s3 then d.v3 else t."rating" end from d where t."id" = d.k',
    )
    expect(every.params).toEqual(['{7,8}', '{"Ann","Bo"}', '{"4.5",NULL}', '{t,f}'])

    // 8 columns have 255 sets, and each column has two modes: the first EXACT_UPDATE_SHAPES + 8
    // sets of modes get a text each, the rest share the form that names and flags every column.
    const Wide = defineSchema({ Wide: entity('wide', { id: t.id(), ...Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`c${i}`, t.integer()])) }) })
    const wide = Wide.meta('Wide')
    const texts = new Set<string>()
    let last: { text: string; params: readonly (string | null)[] } | undefined
    for (let mask = 1; mask < 256; mask++) {
      const columns = [0, 1, 2, 3, 4, 5, 6, 7].filter((i) => mask & (1 << i))
      last = update(
        [
          ['5', columns.map((i) => [i, String(i)])],
          ['6', [[columns[0]!, '9']]],
        ],
        wide,
        Wide,
      )
      texts.add(last.text)
    }
    expect(texts.size).toBe(EXACT_UPDATE_SHAPES + 8 + 1)
    const flagged = [0, 1, 2, 3, 4, 5, 6, 7]
    expect(last!.text).toBe(
      `with d as (select a.* from unnest($1::int8[], ${flagged.map((i) => `$${2 * i + 2}::int4[], $${2 * i + 3}::bool[]`).join(', ')}) ` +
        `as a(k, ${flagged.map((i) => `v${i + 1}, s${i + 1}`).join(', ')}) join "wide" as x on x."id" = a.k order by a.k for no key update of x) ` +
        `update "wide" as t set ${flagged.map((i) => `"c${i}" = case when d.s${i + 1} then d.v${i + 1} else t."c${i}" end`).join(', ')} from d where t."id" = d.k`,
    )
    expect(last!.params).toEqual(['{5,6}', '{0,9}', '{t,t}', ...[1, 2, 3, 4, 5, 6, 7].flatMap((i) => [`{${i},NULL}`, '{t,f}'])])
    // A set of modes seen before keeps its own text.
    expect(
      update(
        [
          ['5', [[2, '1']]],
          ['6', [[2, '2']]],
        ],
        wide,
        Wide,
      ).text,
    ).toBe('with d as (select a.* from unnest($1::int8[], $2::int4[]) as a(k, v3) join "wide" as x on x."id" = a.k order by a.k for no key update of x) update "wide" as t set "c2" = d.v3 from d where t."id" = d.k')
  })

  it('render an update whose rows set one Date once, and whose rows set different Dates as an array', () => {
    const update = (times: (number | undefined)[]) =>
      renderPlan(
        planFlush(
          { ...empty, updates: times.map((time, i) => ({ entity: Author, id: String(7 + i), changed: new Map<number, string | null>(time === undefined ? [[0, 'Ann']] : [[3, String(time)]]) })) },
          bookstore,
        ),
      )[0]![0]!
    const decode = (x: string) => `(timestamptz 'epoch' + (${x} / 1000) * interval '1 second' + (${x} % 1000) * interval '1 millisecond')`
    const at = 1_795_372_200_123
    // Rows that don't set created_at don't count: the two that do share a time, sent once in
    // timestamptz's own text.
    const shared = update([at, undefined, at])
    expect(shared.text).toContain('unnest($1::int8[], $2::text[], $3::bool[], $5::bool[]) as a(k, v1, s1, s4)')
    expect(shared.text).toContain('"created_at" = case when d.s4 then $4::timestamptz else t."created_at" end')
    expect(shared.params).toEqual(['{7,8,9}', '{NULL,"Ann",NULL}', '{f,t,f}', '2026-11-22T18:30:00.123Z', '{t,f,t}'])
    // Different times go as an array of epoch milliseconds, decoded exactly on the server.
    const differ = update([at, at + 1])
    expect(differ.text).toContain('unnest($1::int8[], $2::int8[]) as a(k, v4)')
    expect(differ.text).toContain(`"created_at" = ${decode('d.v4')} from d`)
    expect(differ.params).toEqual(['{7,8}', '{1795372200123,1795372200124}'])
  })

  it('order inserts parents first, then links, updates, link deletes, and deletes children first', () => {
    const link = Book.manyToMany[0]!
    const plan = planFlush(
      {
        inserts: insertsOf([
          { entity: Book, id: '2', values: ['t', null, 'draft', null, '1'] },
          { entity: Author, id: '1', values: ['a', null, '0', String(Date.parse('2026-01-01T00:00:00.000Z'))] },
        ]),
        upserts: [],
        updates: [{ entity: Tag, id: '5', changed: new Map([[0, 'x']]) }],
        deletes: [
          { entity: Author, id: '9' },
          { entity: Book, id: '8' },
        ],
        linkAdds: [
          { link, owner: '2', target: '5' },
          { link, owner: '2', target: '5' },
        ],
        linkRemoves: [{ link, owner: '3', target: '5' }],
      },
      bookstore,
    )
    expect(plan.waves).toHaveLength(1)
    expect(plan.waves[0]!.ops.map((op) => `${op.kind} ${tableOf(op)}`)).toEqual([
      'insert author',
      'insert book',
      'link-insert book_tag',
      'update tag',
      'link-delete book_tag',
      'link-purge book_tag',
      'delete book',
      'delete author',
    ])
    const linkInsert = renderPlan(plan)[0]![2]!
    expect(linkInsert.text).toBe('insert into "book_tag" ("book_id", "tag_id") select * from unnest($1::int8[], $2::int8[]) on conflict do nothing')
    expect(linkInsert.params).toEqual(['{2}', '{5}'])
    // Link deletes lock the join-table rows in key order first, as multi-row deletes lock in id order.
    const [linkDelete, linkPurge] = renderPlan(plan)[0]!.slice(4, 6)
    expect(linkDelete!.text).toBe(
      'with d as (select j."book_id" as o, j."tag_id" as t from "book_tag" as j join unnest($1::int8[], $2::int8[]) as a(o, t) on j."book_id" = a.o and j."tag_id" = a.t order by 1, 2 for update of j) ' +
        'delete from "book_tag" as j using d where j."book_id" = d.o and j."tag_id" = d.t',
    )
    expect(linkDelete!.params).toEqual(['{3}', '{5}'])
    expect(linkPurge!.text).toBe(
      'with d as (select j."book_id" as o, j."tag_id" as t from "book_tag" as j where j."book_id" = any($1::int8[]) order by 1, 2 for update of j) ' +
        'delete from "book_tag" as j using d where j."book_id" = d.o and j."tag_id" = d.t',
    )
  })

  it('insert links without a conflict clause only when every link has a new end', () => {
    const link = Book.manyToMany[0]!
    const linkInsert = (linkAdds: LinkChange[]) => renderPlan(planFlush({ ...empty, linkAdds }, bookstore))[0]![0]!.text
    const fresh: LinkChange = { link, owner: '2', target: '5', fresh: true }
    expect(linkInsert([fresh])).toBe('insert into "book_tag" ("book_id", "tag_id") select * from unnest($1::int8[], $2::int8[])')
    // One link between rows that exist already may be in the table: the whole insert does nothing on a conflict.
    expect(linkInsert([fresh, { link, owner: '3', target: '5' }])).toMatch(/ on conflict do nothing$/)
  })

  it('plan nothing for no changes', () => {
    expect(planFlush(empty, bookstore).waves).toEqual([])
  })
})

describe('lock order', () => {
  it('updates and deletes rows in id order whatever order the changes came in, so concurrent flushes lock alike', () => {
    const title = Book.fields.findIndex((f) => f.prop === 'title')
    const update = (id: string) => ({ entity: Book, id, changed: new Map([[title, `t${id}`]]) })
    const plan = planFlush(
      { ...empty, updates: ['30', '4', '100', '-7', '-12'].map(update), deletes: ['10', '9', '2'].map((id) => ({ entity: Tag, id })) },
      bookstore,
    )
    const ops = plan.waves[0]!.ops.filter((op) => op.kind === 'update' || op.kind === 'delete')
    // By value, as the server orders int8 ids (by text, '100' would come before '30').
    expect(ops.map((op) => ('ids' in op ? op.ids : []))).toEqual([['-12', '-7', '4', '30', '100'], ['2', '9', '10']])
    const updated = ops[0]!
    expect(updated.kind === 'update' && updated.columns[title]!.values).toEqual(['t-12', 't-7', 't4', 't30', 't100'])
    // Within a statement the server sorts and locks them before writing, whatever plan it picks.
    const [updateText, deleteText] = ops.map((op) => renderOp(op).text)
    expect(updateText).toMatch(/^with d as \(select a\.\* from unnest\(.*\) as a\(k, .*\) join "book" as x on x\."id" = a\.k order by a\.k for no key update of x\) update "book" as t /)
    expect(deleteText).toBe(
      'with d as (select a.* from unnest($1::int8[]) as a(k) join "tag" as x on x."id" = a.k order by a.k for update of x) delete from "tag" as t using d where t."id" = d.k',
    )
  })

  it('orders uuid ids by their text, as the server orders uuids', () => {
    const uuids = ['0190a3c4-0000-7000-8000-00000000000b', '0190a3c4-0000-7000-8000-00000000000a', '018f0000-0000-7000-8000-000000000001']
    const plan = planFlush({ ...empty, deletes: uuids.map((id) => ({ entity: UuidTag, id })) }, bookstoreUuid)
    const op = plan.waves[0]!.ops.find((o) => o.kind === 'delete')
    expect(op && 'ids' in op && op.ids).toEqual([...uuids].sort())
  })
})
