import { describe, expect, it } from 'vitest'
import { conditionOf } from '../../src/entity-manager/where.js'
import { InvalidValueError } from '../../src/index.js'
import { renderAggregate, renderCount, renderExists, renderFind } from '../../src/sql/render-select.js'
import { bookstore } from '../support/bookstore.js'

const Author = bookstore.meta('Author')
const Book = bookstore.meta('Book')
const columns = 'select t."id", t."title", t."pages", t."status", t."meta"::text, t."author_id" from "book" as t'

describe('select statements', () => {
  it('bind every value and cast it to the column type', () => {
    const s = renderFind(Book, conditionOf(Book, { title: { like: "O'Brien%" }, author: { in: [1, 2] }, pages: null }), { orderBy: [['"title"', 'desc']], limit: 5 })
    expect(s.text).toBe(`${columns} where t."title" like $1::text and t."author_id" = any($2::int8[]) and t."pages" is null order by t."title" desc limit $3::int8`)
    expect(s.params).toEqual(["O'Brien%", '{"1","2"}', '5'])
  })

  it('render or, and and not as a tree, a negation true for every row its condition is not', () => {
    const where = { or: [{ pages: { gt: 100 } }, { and: [{ status: 'draft' as const }, { not: { title: { ilike: 'a%' } } }] }] }
    const s = renderFind(Book, conditionOf(Book, where))
    expect(s.text).toBe(`${columns} where t."pages" > $1::int4 or (t."status" = $2::"book_status" and (t."title" ilike $3::text) is not true)`)
    expect(s.params).toEqual(['100', 'draft', 'a%'])
  })

  it('join a many-to-one once for every condition across it, at any depth', () => {
    const s = renderFind(bookstore.meta('Review'), conditionOf(bookstore.meta('Review'), { book: { title: 'T', author: { name: { like: 'A%' }, email: null } }, stars: 5 }))
    expect(s.text).toBe(
      'select t."id", t."stars", t."body", t."book_id" from "review" as t left join "book" as j1 on j1."id" = t."book_id" ' +
        'left join "author" as j2 on j2."id" = j1."author_id" where j1."title" = $1::text and j2."name" like $2::text and j2."email" is null and t."stars" = $3::int4',
    )
  })

  it('render some, none and every over a one-to-many and a many-to-many as EXISTS subqueries', () => {
    const s = renderFind(Author, conditionOf(Author, { books: { some: { reviews: { every: { stars: { gte: 4 } } } }, none: { tags: { some: { name: 'x' } } } } }))
    expect(s.text).toBe(
      'select t."id", t."name", t."email", t."rating"::text, floor(extract(epoch from t."created_at") * 1000) from "author" as t where ' +
        'exists (select from "book" as s1 where s1."author_id" = t."id" and not exists (select from "review" as s2 where s2."book_id" = s1."id" and (s2."stars" >= $1::int4) is not true)) ' +
        'and not exists (select from "book" as s3 where s3."author_id" = t."id" and exists (select from "book_tag" as l5 join "tag" as s4 on s4."id" = l5."tag_id" where l5."book_id" = s3."id" and s4."name" = $2::text))',
    )
  })

  it('require a nullable reference to be set before conditions on its entity, and group an or inside some', () => {
    const Review = bookstore.meta('Review')
    const nested = renderFind(Author, conditionOf(Author, { books: { some: { or: [{ pages: 1 }, { reviews: { none: {} } }] } } }))
    expect(nested.text).toContain('exists (select from "book" as s1 where s1."author_id" = t."id" and (s1."pages" = $1::int4 or not exists (select from "review" as s2 where s2."book_id" = s1."id")))')
    // book_id is NOT NULL: its row always joins. A nullable reference has no entity when NULL.
    expect(renderFind(Review, conditionOf(Review, { book: { not: { title: 'x' } } })).text).toContain('where (j1."title" = $1::text) is not true')
  })

  it('take nin, between, jsonb containment and keys', () => {
    const s = renderFind(Book, conditionOf(Book, { pages: { nin: [1, 2], between: [10, 20] }, meta: { contains: { tags: ['a'] }, hasKey: 'isbn' } }))
    expect(s.text).toBe(`${columns} where t."pages" <> all($1::int4[]) and t."pages" between $2::int4 and $3::int4 and t."meta" @> $4::jsonb and t."meta" ? $5::text`)
    expect(s.params).toEqual(['{"1","2"}', '10', '20', '{"tags":["a"]}', 'isbn'])
  })

  it('count, test for existence and aggregate in one statement each', () => {
    const where = conditionOf(Book, { author: { name: 'Ann' } })
    expect(renderCount(Book, where).text).toBe('select count(*)::int8 from "book" as t left join "author" as j1 on j1."id" = t."author_id" where j1."name" = $1::text')
    expect(renderExists(Book, where).text).toBe('select exists (select from "book" as t left join "author" as j1 on j1."id" = t."author_id" where j1."name" = $1::text)')
    const status = { quoted: '"status"', select: (e: string) => e }
    const pages = { quoted: '"pages"', select: (e: string) => e }
    expect(renderAggregate(Book, conditionOf(Book, {}), { groupBy: [status], functions: [{ fn: 'sum', column: pages }, { fn: 'max', column: pages }] }).text).toBe(
      'select t."status", count(*)::int8, sum(t."pages")::text, max(t."pages") from "book" as t group by t."status" order by t."status"',
    )
  })

  it('refuse what the types refuse, before anything is rendered', () => {
    const refused = [
      { title: { gtt: 'a' } },
      { meta: { like: 'a' } },
      { pages: { like: '1' } },
      { status: { ilike: 'd%' } },
      { author: { some: { name: 'a' } } },
      { reviews: { stars: 5 } },
      { reviews: { any: { stars: 5 } } },
      { author: { eq: 1, name: 'a' } },
      { meta: { a: 1 } },
      { or: { title: 'a' } },
      { not: [{ title: 'a' }] },
      { title: { between: ['a'] } },
      { nosuch: 1 },
    ]
    for (const where of refused) expect(() => conditionOf(Book, where), JSON.stringify(where)).toThrow(InvalidValueError)
  })
})
