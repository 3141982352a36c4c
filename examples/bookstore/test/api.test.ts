import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { seed } from '../src/seed.js'
import { SQL_TEXT, STACK_FRAME, startTestBookstore, type TestBookstore } from './support/bookstore.js'

let t: TestBookstore
beforeAll(async () => {
  t = await startTestBookstore({
    name: 'bookstore_api',
    // A route that fails the way a bug would, with SQL and a stack in its message.
    configure: (app) =>
      app.get('/test/boom', async () => {
        throw new Error('select * from "author" failed\n    at handler (/app/src/routes.ts:12:34)')
      }),
  })
})
afterAll(async () => {
  await t?.close()
})

let unique = 0
const uid = () => `${Date.now().toString(36)}-${++unique}`

/** POST /authors with sensible defaults; returns the 201 body. */
async function createAuthor(books: Record<string, unknown>[] = [{ title: 'First', price: '10.00', published: true, stock: 10 }], extra: Record<string, unknown> = {}) {
  const res = await t.call('POST', '/authors', { name: `Author ${uid()}`, books, ...extra })
  expect(res.status, res.text).toBe(201)
  return res.body as { id: number; books: { id: number; version: number; title: string; tags: string[]; stock: number }[] }
}

async function createCustomer(): Promise<number> {
  const em = t.bookstore.orm.em()
  const customer = em.create('Customer', { name: 'Test Customer', email: `c-${uid()}@example.com` })
  await em.flush()
  return customer.id
}

const count = async (table: string, where = 'true', params: (string | number)[] = []): Promise<number> => {
  const [row] = await t.db.unsafe<{ n: number }[]>(`select count(*)::int as n from "${table}" where ${where}`, params)
  return row!.n
}

describe('POST /authors', () => {
  it('creates an author with nested books, tags (found or created by name) and stock in one flush', async () => {
    const em = t.bookstore.orm.em()
    em.create('Tag', { name: `existing-${unique + 1}` })
    await em.flush()
    const existing = `existing-${unique + 1}`

    const res = await t.call('POST', '/authors', {
      name: 'Ursula',
      email: `Ursula-${uid()}@Example.com`,
      books: [
        { title: 'The Dispossessed', price: '14.99', pages: 387, published: true, tags: [existing, 'Science Fiction'], stock: 7 },
        { title: 'Earthsea', price: '9.5', tags: ['science fiction ', 'Fantasy'] },
      ],
    })
    expect(res.status, res.text).toBe(201)
    expect(res.body).toMatchObject({
      name: 'Ursula',
      email: expect.stringMatching(/^ursula-.*@example\.com$/),
      books: [
        { title: 'The Dispossessed', price: '14.99', pages: 387, published: true, version: 1, tags: [existing, 'science fiction'], stock: 7 },
        { title: 'Earthsea', price: '9.5', pages: null, published: false, tags: ['fantasy', 'science fiction'], stock: 0 },
      ],
    })
    // author, book, tag (the new ones), stock, book_tags: five statements, one transaction.
    expect(res.timing).toMatchObject({ statements: 5 })

    const id = res.body.id as number
    const books = await t.db`select id, title, price::text, published, version from book where author_id = ${id} order by id`
    expect(books.map((b) => b.title)).toEqual(['The Dispossessed', 'Earthsea'])
    const links = await t.db`select b.title, t.name from book_tags bt join book b on b.id = bt.book_id join tag t on t.id = bt.tag_id where b.author_id = ${id} order by b.title, t.name`
    expect(links.map((l) => `${l.title}: ${l.name}`)).toEqual(['Earthsea: fantasy', 'Earthsea: science fiction', `The Dispossessed: ${existing}`, 'The Dispossessed: science fiction'])
    expect(await count('tag', 'name = $1', [existing])).toBe(1)
    expect(await count('tag', 'name = $1', ['science fiction'])).toBe(1)
    const stock = await t.db`select s.quantity from stock s join book b on b.id = s.book_id where b.author_id = ${id} order by b.id`
    expect(stock.map((s) => s.quantity)).toEqual([7, 0])
  })

  it('answers 409 for an email that is taken, and creates nothing', async () => {
    const email = `taken-${uid()}@example.com`
    await createAuthor([], { email })
    const before = await count('book')
    const res = await t.call('POST', '/authors', { name: 'Other', email, books: [{ title: 'Not written', price: '1.00' }] })
    expect(res.status).toBe(409)
    expect(res.body).toEqual({ error: 'already exists', entity: 'Author', constraint: 'author_email_key' })
    expect(await count('book')).toBe(before)
  })
})

describe('reads', () => {
  it('GET /authors/:id, /authors, /books and /books/:id return the data with its relations', async () => {
    const author = await createAuthor([
      { title: 'B one', price: '5.00', tags: ['read-a'], stock: 3 },
      { title: 'B two', price: '6.00', published: true },
    ])
    const one = await t.call('GET', `/authors/${author.id}`)
    expect(one.status).toBe(200)
    expect(one.body).toMatchObject({ id: author.id, books: [{ title: 'B one', tags: ['read-a'], stock: 3 }, { title: 'B two', tags: [], stock: 0 }] })
    expect(one.headers.get('server-timing')).toBeNull() // nothing flushed

    const list = await t.call('GET', '/authors?limit=500')
    expect(list.body.find((a: { id: number }) => a.id === author.id)).toMatchObject({ books: [{ title: 'B one' }, { title: 'B two' }] })

    const byAuthor = await t.call('GET', `/books?authorId=${author.id}&published=true`)
    expect(byAuthor.body.map((b: { title: string }) => b.title)).toEqual(['B two'])

    const bookId = author.books[0]!.id
    await t.call('POST', `/books/${bookId}/reviews`, { stars: 4, body: 'good' })
    const book = await t.call('GET', `/books/${bookId}`)
    expect(book.body).toMatchObject({ id: bookId, author: { id: author.id }, tags: ['read-a'], stock: 3, reviewCount: 1, latestReviews: [{ stars: 4, body: 'good' }] })
  })
})

describe('GET /books/search', () => {
  it('filters across relations, pages by cursor and counts', async () => {
    const name = `Searched ${uid()}`
    const author = await createAuthor(
      Array.from({ length: 5 }, (_, i) => ({ title: `S${i} ${uid()}`, price: '1.00', tags: [i % 2 ? 'odd-s' : 'even-s'] })),
      { name },
    )
    for (const book of author.books.slice(0, 4)) await t.call('POST', `/books/${book.id}/reviews`, { stars: book.title.startsWith('S3') ? 2 : 5 })
    const query = `author=${encodeURIComponent(name.slice(0, 15))}&minStars=4&first=2`
    const one = await t.call('GET', `/books/search?${query}`)
    expect(one.status, one.text).toBe(200)
    expect(one.body).toMatchObject({ total: 3, hasNextPage: true, items: [{ title: expect.stringMatching(/^S0 /) }, { title: expect.stringMatching(/^S1 /) }] })
    const two = await t.call('GET', `/books/search?${query}&after=${encodeURIComponent(one.body.endCursor)}`)
    expect(two.body).toMatchObject({ total: 3, hasNextPage: false, items: [{ title: expect.stringMatching(/^S2 /), tags: ['even-s'] }] })
    const tagged = await t.call('GET', `/books/search?author=${encodeURIComponent(name)}&tag=ODD-S`)
    expect(tagged.body.items.map((b: { title: string }) => b.title.slice(0, 2))).toEqual(['S1', 'S3'])
    // A cursor of another search, or a changed one, is a 400; a pattern character in the name is literal.
    expect((await t.call('GET', `/books/search?tag=odd-s&after=${encodeURIComponent(one.body.endCursor)}`)).status).toBe(400)
    expect((await t.call('GET', `/books/search?${query}&after=x${encodeURIComponent(one.body.endCursor)}`)).body).toMatchObject({ error: 'invalid cursor' })
    expect((await t.call('GET', '/books/search?author=%25')).body.total).toBe(0)
  })
})

describe('POST /books/:id/reviews', () => {
  it('adds a review and updates the rating and review count of the book', async () => {
    const { books } = await createAuthor()
    const id = books[0]!.id
    const first = await t.call('POST', `/books/${id}/reviews`, { stars: 5, reviewer: 'ann', body: 'great' })
    expect(first.status, first.text).toBe(201)
    expect(first.body).toMatchObject({ review: { bookId: id, stars: 5, reviewer: 'ann' }, book: { id, rating: '5.00', reviewCount: 1, version: 2 } })
    const second = await t.call('POST', `/books/${id}/reviews`, { stars: 2 })
    expect(second.body.book).toEqual({ id, rating: '3.50', reviewCount: 2, version: 3 })
    expect(second.timing).toMatchObject({ statements: 2 }) // insert review, update book

    const [row] = await t.db`select rating::text, review_count, stars_total, version from book where id = ${id}`
    expect(row).toEqual({ rating: '3.50', review_count: 2, stars_total: 7, version: 3 })
    expect(await count('review', 'book_id = $1', [id])).toBe(2)
  })

  it('loses no review when several are posted to one book at once (conflicts are retried)', async () => {
    const { books } = await createAuthor()
    const id = books[0]!.id
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => t.call('POST', `/books/${id}/reviews`, { stars: 1 + (i % 5) })))
    expect(results.map((r) => r.status)).toEqual(Array(5).fill(201))
    const [row] = await t.db`select review_count, stars_total from book where id = ${id}`
    expect(row).toEqual({ review_count: 5, stars_total: 1 + 2 + 3 + 4 + 5 })
    expect(await count("review", "book_id = $1", [id])).toBe(5)
  })
})

describe('PATCH /books/:id', () => {
  it('changes several fields and advances the version', async () => {
    const { books } = await createAuthor([{ title: 'Draft', price: '10.00', pages: 100 }])
    const id = books[0]!.id
    const res = await t.call('PATCH', `/books/${id}`, { version: 1, title: 'Final', price: '12.50', published: true, pages: null })
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ id, title: 'Final', price: '12.50', published: true, pages: null, version: 2 })
    expect(res.timing).toMatchObject({ statements: 1 })
    const [row] = await t.db`select title, price::text, published, pages, version from book where id = ${id}`
    expect(row).toEqual({ title: 'Final', price: '12.50', published: true, pages: null, version: 2 })
  })

  it('answers 409 to a second PATCH sent with the same (now stale) version', async () => {
    const { books } = await createAuthor()
    const id = books[0]!.id
    const first = await t.call('PATCH', `/books/${id}`, { version: 1, title: 'Mine' })
    expect(first.status).toBe(200)
    const second = await t.call('PATCH', `/books/${id}`, { version: 1, title: 'Theirs' })
    expect(second.status).toBe(409)
    expect(second.body).toMatchObject({ error: 'stale version', entity: 'Book', sentVersion: 1, currentVersion: 2 })
    const [row] = await t.db`select title, version from book where id = ${id}`
    expect(row).toEqual({ title: 'Mine', version: 2 })
  })

  it('lets exactly one of several concurrent PATCHes with the same version win', async () => {
    const { books } = await createAuthor()
    const id = books[0]!.id
    const results = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((title) => t.call('PATCH', `/books/${id}`, { version: 1, title })))
    const statuses = results.map((r) => r.status).sort()
    expect(statuses).toEqual([200, 409, 409, 409, 409])
    for (const r of results.filter((r) => r.status === 409)) expect(r.body.error).toBe('stale version')
    const winner = results.find((r) => r.status === 200)!.body.title
    const [row] = await t.db`select title, version from book where id = ${id}`
    expect(row).toEqual({ title: winner, version: 2 })
  })

  it('answers 400 to a PATCH without anything to change, and to a published book without a price', async () => {
    const { books } = await createAuthor([{ title: 'Free', price: '0' }])
    const id = books[0]!.id
    const empty = await t.call('PATCH', `/books/${id}`, { version: 1 })
    expect(empty.status).toBe(400)
    expect(empty.body.problems[0].message).toMatch(/nothing to change/)
    // Flushwave's entity rule (hooks.entities.Book.validate): nothing is sent.
    const invalid = await t.call('PATCH', `/books/${id}`, { version: 1, published: true })
    expect(invalid.status).toBe(400)
    expect(invalid.body).toEqual({ error: 'validation failed', problems: [{ path: `Book#${id}`, message: 'a published book must have a price above 0' }] })
    const [row] = await t.db`select published, version from book where id = ${id}`
    expect(row).toEqual({ published: false, version: 1 })
  })
})

describe('POST /books/move', () => {
  it('moves books to another author', async () => {
    const from = await createAuthor([
      { title: 'M1', price: '1.00' },
      { title: 'M2', price: '1.00' },
      { title: 'M3', price: '1.00' },
    ])
    const to = await createAuthor([])
    const ids = from.books.slice(0, 2).map((b) => b.id)
    const res = await t.call('POST', '/books/move', { bookIds: ids, toAuthorId: to.id })
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ toAuthorId: to.id, moved: ids })
    expect(res.timing).toMatchObject({ statements: 1 })
    const rows = await t.db`select id, author_id, version from book where id = any(${from.books.map((b) => b.id)}) order by id`
    expect(rows.map((r) => Number(r.author_id))).toEqual([to.id, to.id, from.id])
    expect(rows.map((r) => r.version)).toEqual([2, 2, 1])
  })

  it('answers 404 listing the missing books, and moves nothing', async () => {
    const from = await createAuthor()
    const to = await createAuthor([])
    const res = await t.call('POST', '/books/move', { bookIds: [from.books[0]!.id, 999_999_991, 999_999_992], toAuthorId: to.id })
    expect(res.status).toBe(404)
    expect(res.body).toEqual({ error: 'not found', entity: 'Book', ids: [999_999_991, 999_999_992] })
    const missingAuthor = await t.call('POST', '/books/move', { bookIds: [from.books[0]!.id], toAuthorId: 999_999_993 })
    expect(missingAuthor.status).toBe(404)
    expect(await count('book', 'id = $1 and author_id = $2', [from.books[0]!.id, from.id])).toBe(1)
  })
})

describe('DELETE /authors/:id', () => {
  it('deletes the author; its books, their reviews, tag links and stock go by cascade; sold lines keep their title', async () => {
    const author = await createAuthor([
      { title: 'Gone 1', price: '3.00', published: true, tags: ['kept-tag'], stock: 5 },
      { title: 'Gone 2', price: '4.00', published: true, stock: 5 },
    ])
    const [b1, b2] = author.books.map((b) => b.id) as [number, number]
    await t.call('POST', `/books/${b1}/reviews`, { stars: 3 })
    await t.call('POST', `/books/${b2}/reviews`, { stars: 4 })
    const customerId = await createCustomer()
    const order = await t.call('POST', '/checkout', { customerId, lines: [{ bookId: b1, quantity: 1 }] })
    expect(order.status, order.text).toBe(201)

    const res = await t.call('DELETE', `/authors/${author.id}`)
    expect(res.status, res.text).toBe(200)
    expect(res.body).toEqual({ deleted: { entity: 'Author', id: author.id } })
    // cascades to review, stock, book_tags, book; order_line nulled; author
    expect(res.timing).toMatchObject({ statements: 6 })
    expect(await count('author', 'id = $1', [author.id])).toBe(0)
    expect(await count('book', 'id = any($1)', [`{${b1},${b2}}`])).toBe(0)
    expect(await count('review', 'book_id = any($1)', [`{${b1},${b2}}`])).toBe(0)
    expect(await count('book_tags', 'book_id = any($1)', [`{${b1},${b2}}`])).toBe(0)
    expect(await count('stock', 'book_id = any($1)', [`{${b1},${b2}}`])).toBe(0)
    expect(await count('tag', 'name = $1', ['kept-tag'])).toBe(1)
    const lines = await t.db`select book_id, title from order_line where order_id = ${order.body.order.id}`
    expect(lines).toEqual([{ book_id: null, title: 'Gone 1' }])
    expect((await t.call('GET', `/authors/${author.id}`)).status).toBe(404)
  })
})

describe('POST /checkout', () => {
  it('writes an order, its lines, the stock, the customer and an audit row in one flush', async () => {
    const { books } = await createAuthor([
      { title: 'C1', price: '10.00', published: true, stock: 5 },
      { title: 'C2', price: '2.50', published: true, stock: 5 },
    ])
    const [c1, c2] = books.map((b) => b.id) as [number, number]
    const customerId = await createCustomer()
    const res = await t.call('POST', '/checkout', {
      customerId,
      reference: `ref-${uid()}`,
      lines: [
        { bookId: c2, quantity: 2 },
        { bookId: c1, quantity: 1 },
        { bookId: c2, quantity: 1 },
      ],
    })
    expect(res.status, res.text).toBe(201)
    expect(res.body).toMatchObject({
      order: { customerId, status: 'placed', total: '17.50', lines: [{ bookId: c1, quantity: 1, unitPrice: '10.00' }, { bookId: c2, quantity: 3, unitPrice: '2.50' }] },
      customer: { id: customerId, orderCount: 1, version: 2 },
    })
    // order, order_line, audit_log inserts; stock and customer updates.
    expect(res.timing).toMatchObject({ statements: 5 })

    const orderId = res.body.order.id as number
    const [order] = await t.db`select customer_id, total::text, status from "order" where id = ${orderId}`
    expect(order).toEqual({ customer_id: String(customerId), total: '17.50', status: 'placed' })
    expect(await count('order_line', 'order_id = $1', [orderId])).toBe(2)
    const stock = await t.db`select book_id, quantity, version from stock where book_id = any(${[c1, c2]}) order by book_id`
    expect(stock.map((s) => [Number(s.book_id), s.quantity, s.version])).toEqual([
      [c1, 4, 2],
      [c2, 2, 2],
    ])
    const [customer] = await t.db`select order_count from customer where id = ${customerId}`
    expect(customer).toEqual({ order_count: 1 })
    const [audit] = await t.db`select action, subject, detail from audit_log where order_id = ${orderId}`
    expect(audit).toMatchObject({ action: 'checkout', subject: `customer:${customerId}`, detail: { total: '17.50' } })

    const read = await t.call('GET', `/orders/${orderId}`)
    expect(read.body).toMatchObject({ id: orderId, total: '17.50', lines: [{ bookId: c1 }, { bookId: c2 }] })
  })

  it('commits nothing when one line asks for more than the stock (409 lists every shortage)', async () => {
    const { books } = await createAuthor([
      { title: 'S1', price: '1.00', published: true, stock: 5 },
      { title: 'S2', price: '1.00', published: true, stock: 1 },
    ])
    const [s1, s2] = books.map((b) => b.id) as [number, number]
    const customerId = await createCustomer()
    const reference = `short-${uid()}`
    const audits = await count('audit_log')
    const res = await t.call('POST', '/checkout', { customerId, reference, lines: [{ bookId: s1, quantity: 2 }, { bookId: s2, quantity: 3 }] })
    expect(res.status).toBe(409)
    expect(res.body).toEqual({ error: 'insufficient stock', problems: [{ bookId: s2, requested: 3, available: 1 }] })
    expect(res.headers.get('server-timing')).toBeNull()
    expect(await count('order', 'reference = $1', [reference])).toBe(0)
    expect(await count('order', 'customer_id = $1', [customerId])).toBe(0)
    expect(await count('audit_log')).toBe(audits)
    const stock = await t.db`select quantity from stock where book_id = any(${[s1, s2]}) order by book_id`
    expect(stock.map((s) => s.quantity)).toEqual([5, 1])
    const [customer] = await t.db`select order_count, version from customer where id = ${customerId}`
    expect(customer).toEqual({ order_count: 0, version: 1 })
  })

  it('commits nothing when the database rejects a statement mid-pipeline (a reused reference: unique violation)', async () => {
    const { books } = await createAuthor([{ title: 'R1', price: '4.00', published: true, stock: 10 }])
    const bookId = books[0]!.id
    const customerId = await createCustomer()
    const reference = `dup-${uid()}`
    const first = await t.call('POST', '/checkout', { customerId, reference, lines: [{ bookId, quantity: 1 }] })
    expect(first.status).toBe(201)
    const audits = await count('audit_log')
    const lines = await count('order_line')

    // The INSERT into "order" fails on the server; the order_line and audit_log inserts and the stock
    // and customer updates after it in the same pipeline are rolled back with it.
    const second = await t.call('POST', '/checkout', { customerId, reference, lines: [{ bookId, quantity: 3 }] })
    expect(second.status).toBe(409)
    expect(second.body).toEqual({ error: 'already exists', entity: 'Order', constraint: 'order_reference_key' })
    expect(await count('order', 'reference = $1', [reference])).toBe(1)
    expect(await count('order_line')).toBe(lines)
    expect(await count('audit_log')).toBe(audits)
    const [stock] = await t.db`select quantity from stock where book_id = ${bookId}`
    expect(stock).toEqual({ quantity: 9 })
    const [customer] = await t.db`select order_count from customer where id = ${customerId}`
    expect(customer).toEqual({ order_count: 1 })
  })

  it('sells every unit exactly once when checkouts race for the last copies', async () => {
    const { books } = await createAuthor([{ title: 'Rare', price: '99.00', published: true, stock: 3 }])
    const bookId = books[0]!.id
    const customers = await Promise.all(Array.from({ length: 6 }, createCustomer))
    const results = await Promise.all(customers.map((customerId) => t.call('POST', '/checkout', { customerId, lines: [{ bookId, quantity: 1 }] })))
    expect(results.filter((r) => r.status === 201)).toHaveLength(3)
    for (const r of results.filter((r) => r.status !== 201)) expect(r.body.error).toBe('insufficient stock')
    const [stock] = await t.db`select quantity from stock where book_id = ${bookId}`
    expect(stock).toEqual({ quantity: 0 })
    expect(await count('order_line', 'book_id = $1', [bookId])).toBe(3)
  })

  it('answers 404 for an unknown customer or book, and 409 for a book not for sale', async () => {
    const { books } = await createAuthor([{ title: 'Unpublished', price: '1.00', stock: 4 }])
    const customerId = await createCustomer()
    const noCustomer = await t.call('POST', '/checkout', { customerId: 999_999_999, lines: [{ bookId: books[0]!.id, quantity: 1 }] })
    expect(noCustomer.status).toBe(404)
    expect(noCustomer.body).toEqual({ error: 'not found', entity: 'Customer', id: 999_999_999 })
    const noBook = await t.call('POST', '/checkout', { customerId, lines: [{ bookId: 999_999_998, quantity: 1 }] })
    expect(noBook.body).toEqual({ error: 'not found', entity: 'Book', ids: [999_999_998] })
    const unpublished = await t.call('POST', '/checkout', { customerId, lines: [{ bookId: books[0]!.id, quantity: 1 }] })
    expect(unpublished.status).toBe(409)
    expect(unpublished.body).toEqual({ error: 'not for sale', entity: 'Book', ids: [books[0]!.id] })
  })
})

describe('errors', () => {
  it('answers 400 listing every problem of a body (JSON schema, all errors)', async () => {
    const res = await t.call('POST', '/authors', {
      name: '',
      email: 'not an email',
      books: [{ title: 7, price: '12.345', stock: -1, colour: 'red' }, { published: 'yes' }],
      nickname: 'x',
    })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('invalid request')
    expect(res.body.problems).toEqual(
      expect.arrayContaining([
        { path: 'body/nickname', message: 'is not an accepted property' },
        { path: 'body/name', message: 'must NOT have fewer than 1 characters' },
        { path: 'body/email', message: 'must match format "email"' },
        { path: 'body/books/0/title', message: 'must be string' },
        { path: 'body/books/0/price', message: expect.stringMatching(/^must match pattern/) },
        { path: 'body/books/0/stock', message: 'must be >= 0' },
        { path: 'body/books/0/colour', message: 'is not an accepted property' },
        { path: 'body/books/1/title', message: 'is required' },
        { path: 'body/books/1/price', message: 'is required' },
        { path: 'body/books/1/published', message: 'must be boolean' },
      ]),
    )
    expect(res.body.problems).toHaveLength(10)
  })

  it('answers 400 to bad parameters, bad JSON and types it will not coerce', async () => {
    const param = await t.call('GET', '/books/abc')
    expect(param.status).toBe(400)
    expect(param.body.problems).toEqual([{ path: 'params/id', message: expect.stringMatching(/^must match pattern/) }])
    const json = await t.call('POST', '/authors', undefined, { raw: '{"name": ' })
    expect(json.status).toBe(400)
    expect(json.body).toEqual({ error: 'bad request', message: expect.stringMatching(/not valid JSON/) })
    const coerced = await t.call('POST', '/books/1/reviews', { stars: '5' })
    expect(coerced.status).toBe(400)
    expect(coerced.body.problems).toEqual([{ path: 'body/stars', message: 'must be integer' }])
  })

  it('answers 400 with the failures of Flushwave validation (entity rules, invalid values), and writes nothing', async () => {
    const before = await count('author')
    const rules = await t.call('POST', '/authors', {
      name: 'Rules',
      books: [
        { title: 'Gratis', price: '0', published: true },
        { title: 'Also gratis', price: '0.00', published: true },
        { title: 'Fine', price: '0' },
      ],
    })
    expect(rules.status).toBe(400)
    expect(rules.body).toEqual({
      error: 'validation failed',
      problems: [
        // Named by the id each took from the pool at create, when the pool held one.
        { path: expect.stringMatching(/^new Book(#\d+)?$/), message: 'a published book must have a price above 0' },
        { path: expect.stringMatching(/^new Book(#\d+)?$/), message: 'a published book must have a price above 0' },
      ],
    })
    // A NUL character passes JSON schema but no PostgreSQL text column: InvalidValueError.
    const nul = await t.call('POST', '/authors', { name: 'Nul', books: [{ title: 'x', price: '1', tags: ['bad\u0000tag'] }] })
    expect(nul.status).toBe(400)
    expect(nul.body.error).toBe('validation failed')
    expect(nul.body.problems).toEqual([{ path: 'Tag.name', message: expect.stringContaining('NUL') }])
    expect(await count('author')).toBe(before)
  })

  it('answers 404 for missing entities and unknown routes', async () => {
    expect((await t.call('GET', '/authors/999999999')).body).toEqual({ error: 'not found', entity: 'Author', id: 999999999 })
    expect((await t.call('GET', '/books/999999999')).status).toBe(404)
    expect((await t.call('PATCH', '/books/999999999', { version: 1, title: 'x' })).status).toBe(404)
    expect((await t.call('POST', '/books/999999999/reviews', { stars: 3 })).status).toBe(404)
    expect((await t.call('DELETE', '/authors/999999999')).status).toBe(404)
    expect((await t.call('GET', '/orders/999999999')).status).toBe(404)
    const route = await t.call('GET', '/nowhere')
    expect(route.status).toBe(404)
    expect(route.body).toEqual({ error: 'not found', route: 'GET /nowhere' })
  })

  it('answers 500 with "internal error" only, whatever the error said', async () => {
    const res = await t.call('GET', '/test/boom')
    expect(res.status).toBe(500)
    expect(res.body).toEqual({ error: 'internal error' })
  })
})

describe('Server-Timing', () => {
  it('is set on every response that flushed, with duration, statements and round trips', async () => {
    const { books } = await createAuthor()
    const res = await t.call('POST', `/books/${books[0]!.id}/reviews`, { stars: 3 })
    expect(res.headers.get('server-timing')).toMatch(/^flush;dur=\d+\.\d;desc="2 statements, \d+ round trips?(, id allocation)?(, \d+ cold)?(, attempt \d+)?"$/)
  })
})

describe('seed', () => {
  it('is idempotent: a second run creates nothing', async () => {
    const first = await seed(t.bookstore.orm)
    const tables = ['author', 'book', 'tag', 'book_tags', 'stock', 'review', 'customer']
    const counts = await Promise.all(tables.map((table) => count(table)))
    const second = await seed(t.bookstore.orm)
    expect(first.created).toMatchObject({ author: 5, customer: 20 })
    expect(second.created).toEqual({})
    expect(second).toMatchObject({ authorId: first.authorId, bookIds: first.bookIds, customerId: first.customerId })
    expect(await Promise.all(tables.map((table) => count(table)))).toEqual(counts)
  })
})

describe('responses', () => {
  it('never contain a stack trace or SQL text', () => {
    expect(t.bodies.length).toBeGreaterThan(50)
    for (const body of t.bodies) {
      expect(body).not.toMatch(STACK_FRAME)
      expect(body).not.toMatch(SQL_TEXT)
    }
  })
})
