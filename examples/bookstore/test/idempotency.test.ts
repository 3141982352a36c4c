import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestBookstore, type ApiResponse, type TestBookstore } from './support/bookstore.js'

/** POST /checkout with an Idempotency-Key: a request sent again is answered from the record and writes nothing. */
let t: TestBookstore
beforeAll(async () => {
  t = await startTestBookstore({ name: 'bookstore_idempotency' })
})
afterAll(async () => {
  await t?.close()
})

let unique = 0
const uid = () => `${Date.now().toString(36)}-${++unique}`

async function createBook(stock: number, price = '10.00'): Promise<number> {
  const res = await t.call('POST', '/authors', { name: `Author ${uid()}`, books: [{ title: `Book ${uid()}`, price, published: true, stock }] })
  expect(res.status, res.text).toBe(201)
  return res.body.books[0].id as number
}

async function createCustomer(): Promise<number> {
  const em = t.bookstore.orm.em()
  const customer = em.create('Customer', { name: 'Keyed Customer', email: `k-${uid()}@example.com` })
  await em.flush()
  return customer.id
}

const checkout = (key: string | undefined, body: unknown): Promise<ApiResponse> =>
  t.call('POST', '/checkout', body, key === undefined ? {} : { headers: { 'idempotency-key': key } })

const n = async (query: Promise<{ n: number }[]>): Promise<number> => (await query)[0]!.n

/** What a checkout writes, for one customer and some books: every count a retry must leave alone. */
async function written(customerId: number, bookIds: number[]) {
  const [customer] = await t.db`select order_count, version from customer where id = ${customerId}`
  return {
    orders: await n(t.db`select count(*)::int as n from "order" where customer_id = ${customerId}`),
    lines: await n(t.db`select count(*)::int as n from order_line l join "order" o on o.id = l.order_id where o.customer_id = ${customerId}`),
    audits: await n(t.db`select count(*)::int as n from audit_log where subject = ${`customer:${customerId}`}`),
    stock: (await t.db`select quantity from stock where book_id = any(${bookIds}) order by book_id`).map((s) => s.quantity as number),
    orderCount: customer!.order_count as number,
    customerVersion: customer!.version as number,
  }
}

const keyRows = (key: string) => n(t.db`select count(*)::int as n from flushwave_idempotency where key = ${`checkout:${key}`}`)

describe('POST /checkout with an Idempotency-Key', () => {
  it('creates one order for a key sent twice, and answers the second with the first body, byte for byte', async () => {
    const [b1, b2] = [await createBook(10, '14.99'), await createBook(10, '13.50')]
    const customerId = await createCustomer()
    const key = `order-${uid()}`
    const body = { customerId, lines: [{ bookId: b1, quantity: 1 }, { bookId: b2, quantity: 2 }] }

    const first = await checkout(key, body)
    expect(first.status, first.text).toBe(201)
    expect(first.headers.get('idempotent-replayed')).toBeNull()
    expect(first.timing).toBeDefined()
    expect(first.headers.get('content-type')).toBe('application/json; charset=utf-8')

    const second = await checkout(key, body)
    expect(second.status, second.text).toBe(201)
    expect(second.headers.get('idempotent-replayed')).toBe('true')
    expect(second.headers.get('server-timing')).toBeNull()
    expect(second.headers.get('content-type')).toBe('application/json; charset=utf-8')
    expect(second.text).toBe(first.text)

    expect(await written(customerId, [b1, b2])).toEqual({ orders: 1, lines: 2, audits: 1, stock: [9, 8], orderCount: 1, customerVersion: 2 })
    expect(await keyRows(key)).toBe(1)

    // The body recorded before the flush says what the database holds: ids, createdAt, lines.
    const { order, customer } = first.body
    expect(customer).toEqual({ id: customerId, name: 'Keyed Customer', email: expect.stringMatching(/@example\.com$/) })
    expect(order).toMatchObject({ customerId, total: '41.99', status: 'placed', reference: null })
    const [row] = await t.db`select id, created_at from "order" where customer_id = ${customerId}`
    expect(order.id).toBe(Number(row!.id))
    expect(order.createdAt).toBe((row!.created_at as Date).toISOString())
    expect((await t.call('GET', `/orders/${order.id}`)).body).toEqual(order)
  })

  it('writes one order for 20 concurrent requests with one key, and answers all 20 with the same 201 body', async () => {
    const bookId = await createBook(100)
    const customerId = await createCustomer()
    const key = `burst-${uid()}`
    const body = { customerId, lines: [{ bookId, quantity: 3 }] }

    const responses = await Promise.all(Array.from({ length: 20 }, () => checkout(key, body)))
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(201))
    expect(new Set(responses.map((r) => r.text)).size).toBe(1)
    const firsts = responses.filter((r) => r.headers.get('idempotent-replayed') === null)
    expect(firsts).toHaveLength(1)
    expect(firsts[0]!.timing).toBeDefined()
    for (const r of responses.filter((r) => r !== firsts[0])) {
      expect(r.headers.get('idempotent-replayed')).toBe('true')
      expect(r.headers.get('server-timing')).toBeNull()
    }
    expect(await written(customerId, [bookId])).toEqual({ orders: 1, lines: 1, audits: 1, stock: [97], orderCount: 1, customerVersion: 2 })
  })

  it('answers 422 to a key sent again with another body, and writes nothing', async () => {
    const bookId = await createBook(10)
    const customerId = await createCustomer()
    const key = `reuse-${uid()}`
    const first = await checkout(key, { customerId, lines: [{ bookId, quantity: 1 }] })
    expect(first.status, first.text).toBe(201)
    const before = await written(customerId, [bookId])

    const other = await checkout(key, { customerId, lines: [{ bookId, quantity: 2 }] })
    expect(other.status).toBe(422)
    expect(other.body).toEqual({ error: 'idempotency key reused with a different request' })
    expect(other.headers.get('idempotent-replayed')).toBeNull()
    // Another body that would be a 404 (and, with the key fresh, was one): still the key's 422.
    const unknownBook = await checkout(key, { customerId, lines: [{ bookId: 999_999_997, quantity: 1 }] })
    expect(unknownBook.status).toBe(422)
    expect(await written(customerId, [bookId])).toEqual(before)

    // The same request with its properties in another order is the same request.
    const reordered = await t.call('POST', '/checkout', undefined, {
      raw: `{"lines":[{"quantity":1,"bookId":${bookId}}],"customerId":${customerId}}`,
      headers: { 'idempotency-key': key },
    })
    expect(reordered.status).toBe(201)
    expect(reordered.text).toBe(first.text)
    expect(await written(customerId, [bookId])).toEqual(before)
  })

  it('answers 400 to a key that is empty, longer than 200 characters or not printable ASCII, and writes nothing', async () => {
    const bookId = await createBook(10)
    const customerId = await createCustomer()
    const body = { customerId, lines: [{ bookId, quantity: 1 }] }
    for (const key of ['', 'k'.repeat(201), 'clé-1', 'tab\there']) {
      const res = await checkout(key, body)
      expect(res.status, JSON.stringify(key)).toBe(400)
      expect(res.body).toEqual({ error: 'invalid request', problems: [{ path: 'headers/idempotency-key', message: 'must be 1 to 200 printable ASCII characters' }] })
    }
    expect(await written(customerId, [bookId])).toMatchObject({ orders: 0, stock: [10], orderCount: 0 })

    const longest = await checkout(`${uid()} ~!`.padEnd(200, 'x'), body)
    expect(longest.status, longest.text).toBe(201)
  })

  it('records nothing for a checkout that fails (409), so the same key succeeds once the stock is there', async () => {
    const bookId = await createBook(1)
    const customerId = await createCustomer()
    const key = `short-${uid()}`
    const body = { customerId, lines: [{ bookId, quantity: 3 }] }

    const failed = await checkout(key, body)
    expect(failed.status).toBe(409)
    expect(failed.body).toEqual({ error: 'insufficient stock', problems: [{ bookId, requested: 3, available: 1 }] })
    expect(await keyRows(key)).toBe(0)
    expect(await written(customerId, [bookId])).toMatchObject({ orders: 0, stock: [1], orderCount: 0 })

    await t.db`update stock set quantity = 5 where book_id = ${bookId}`
    const succeeded = await checkout(key, body)
    expect(succeeded.status, succeeded.text).toBe(201)
    expect(succeeded.headers.get('idempotent-replayed')).toBeNull()
    expect(await keyRows(key)).toBe(1)
    expect(await written(customerId, [bookId])).toMatchObject({ orders: 1, stock: [2], orderCount: 1 })
  })

  it('replays a checkout that bought the last copies instead of answering 409 to its retry', async () => {
    const bookId = await createBook(2)
    const customerId = await createCustomer()
    const key = `last-${uid()}`
    const body = { customerId, lines: [{ bookId, quantity: 2 }] }

    const first = await checkout(key, body)
    expect(first.status, first.text).toBe(201)
    const retry = await checkout(key, body)
    expect(retry.status, retry.text).toBe(201)
    expect(retry.headers.get('idempotent-replayed')).toBe('true')
    expect(retry.text).toBe(first.text)
    // Without the key, the same request is a new checkout: there is nothing left to sell.
    const unkeyed = await checkout(undefined, body)
    expect(unkeyed.status).toBe(409)
    expect(await written(customerId, [bookId])).toMatchObject({ orders: 1, stock: [0], orderCount: 1 })
  })

  it('keeps the 404 of an unknown book with a fresh key, and records nothing', async () => {
    const customerId = await createCustomer()
    const key = `missing-${uid()}`
    const res = await checkout(key, { customerId, lines: [{ bookId: 999_999_996, quantity: 1 }] })
    expect(res.status).toBe(404)
    expect(res.body).toEqual({ error: 'not found', entity: 'Book', ids: [999_999_996] })
    expect(await keyRows(key)).toBe(0)
  })
})
