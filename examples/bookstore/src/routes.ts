/**
 * The handlers. Each request gets its own EntityManager (`request.em()`); each write handler reads what
 * it needs, changes entities in memory and ends with one `em.flush()` (a checkout with an
 * Idempotency-Key leaves it to `orm.unitOfWork`): BEGIN, every statement and COMMIT in one pipeline,
 * all or nothing. The Server-Timing header tells how long that took and how
 * many round trips it waited on.
 */
import type { FastifyInstance } from 'fastify'
import { CheckViolationError, type EntityManager, type Flushwave } from 'flushwave'
import { HttpError } from './errors.js'
import {
  checkoutBody,
  createAuthorBody,
  createReviewBody,
  idParams,
  listQuery,
  searchQuery,
  moveBooksBody,
  PATCHABLE,
  patchBookBody,
  toId,
  type CheckoutBody,
  type CreateAuthorBody,
  type CreateReviewBody,
  type IdParams,
  type ListQuery,
  type SearchQuery,
  type MoveBooksBody,
  type PatchBookBody,
} from './http-schemas.js'
import { remember } from './consistency.js'
import { fingerprint, idempotencyKeyOf, replay, type Recorded } from './idempotency.js'
import { isConcurrencyConflict, isTagRace, MAX_ATTEMPTS, retrying } from './retry.js'
import type { Book, Customer, Defs, Order, OrderLine, Stock, Tag } from './schema.js'
import { timed } from './server-timing.js'
import { authorView, BOOK_RELATIONS, bookView, customerSummary, customerView, fromCents, fullBookView, orderView, populateBooks, reviewView, toCents } from './views.js'

const byId = <T extends { id: number }>(a: T, b: T): number => a.id - b.id

/** Tag names are stored trimmed and lower-case: "Science Fiction " and "science fiction" are one tag. */
export const normalizeTag = (name: string): string => name.trim().toLowerCase()

export function routes(app: FastifyInstance, orm: Flushwave<Defs>): void {
  // ── reads ──────────────────────────────────────────────────────────────────────────────────────

  app.get('/health', async () => ({ ok: true }))

  app.get<{ Querystring: ListQuery }>('/authors', { schema: { querystring: listQuery } }, async (request) => {
    const em = request.em()
    const authors = await em.find('Author', {}, { orderBy: { id: 'asc' }, limit: Number(request.query.limit ?? 50) })
    await em.populate(authors, 'books')
    return authors.map((a) => authorView(a, [...a.books.items].sort(byId).map((b) => bookView(b))))
  })

  app.get<{ Params: IdParams }>('/authors/:id', { schema: { params: idParams } }, async (request) => {
    const em = request.em()
    const author = await em.load('Author', toId(request.params.id))
    await em.populate(author, 'books')
    const books = [...author.books.items].sort(byId)
    await populateBooks(em, books)
    return authorView(author, books.map(fullBookView))
  })

  app.get<{ Querystring: ListQuery }>('/books', { schema: { querystring: listQuery } }, async (request) => {
    const { authorId, published, limit } = request.query
    const em = request.em()
    const books = await em.find(
      'Book',
      { ...(authorId ? { author: toId(authorId) } : {}), ...(published ? { published: published === 'true' } : {}) },
      { orderBy: { id: 'asc' }, limit: Number(limit ?? 100) },
    )
    await populateBooks(em, books)
    return books.map(fullBookView)
  })

  // A list endpoint: books by author name, tag and review stars (conditions across three relations),
  // a page of them by cursor and their total, read together in one round trip.
  app.get<{ Querystring: SearchQuery }>('/books/search', { schema: { querystring: searchQuery } }, async (request) => {
    const { author, tag, minStars, first, after } = request.query
    const where = {
      ...(author ? { author: { name: { ilike: `%${author.replace(/[\\%_]/g, '\\$&')}%` } } } : {}),
      ...(tag ? { tags: { some: { name: normalizeTag(tag) } } } : {}),
      ...(minStars ? { reviews: { some: { stars: { gte: Number(minStars) } } } } : {}),
    }
    const em = request.em()
    // The count, the page and what the page shows of each book: one round trip.
    const [total, page] = await Promise.all([
      em.count('Book', where),
      em.findPage('Book', where, { orderBy: { title: 'asc' }, first: Number(first ?? 20), after, populate: BOOK_RELATIONS }),
    ])
    return { total, items: page.items.map(fullBookView), endCursor: page.endCursor ?? null, hasNextPage: page.hasNextPage }
  })

  app.get<{ Params: IdParams }>('/books/:id', { schema: { params: idParams } }, async (request) => {
    const em = request.em()
    const id = toId(request.params.id)
    const book = await em.load('Book', id)
    const [reviews] = await Promise.all([
      em.find('Review', { book: id }, { orderBy: { id: 'desc' }, limit: 10 }),
      em.populate(book, 'author', 'tags', 'stock'),
    ])
    return { ...fullBookView(book), author: authorView(book.author), latestReviews: reviews.map(reviewView) }
  })

  app.get<{ Querystring: ListQuery }>('/customers', { schema: { querystring: listQuery } }, async (request) => {
    const customers = await request.em().find('Customer', {}, { orderBy: { id: 'asc' }, limit: Number(request.query.limit ?? 100) })
    return customers.map(customerView)
  })

  app.get<{ Params: IdParams }>('/orders/:id', { schema: { params: idParams } }, async (request) => {
    const em = request.em()
    const order = await em.load('Order', toId(request.params.id))
    await em.populate(order, 'lines')
    return orderView(order, [...order.lines.items].sort(byId))
  })

  // ── writes: one unit of work, one flush ─────────────────────────────────────────────────────────

  /** An author with nested books, their tags (found by name or created) and stock: 5 tables. */
  app.post<{ Body: CreateAuthorBody }>('/authors', { schema: { body: createAuthorBody } }, async (request, reply) => {
    const body = request.body
    return retrying(isTagRace, async (attempt) => {
      const em = request.em()
      const names = [...new Set((body.books ?? []).flatMap((b) => b.tags ?? []).map(normalizeTag))]
      const tags = new Map<string, Tag>()
      if (names.length > 0) for (const tag of await em.find('Tag', { name: { in: names } })) tags.set(tag.name, tag)
      for (const name of names) if (!tags.has(name)) tags.set(name, em.create('Tag', { name }))

      const author = em.create('Author', { name: body.name, email: body.email?.toLowerCase() ?? null })
      const created = (body.books ?? []).map((input) => {
        const book = em.create('Book', {
          author,
          title: input.title,
          price: input.price,
          pages: input.pages ?? null,
          published: input.published ?? false,
          tags: (input.tags ?? []).map((name) => tags.get(normalizeTag(name))!),
        })
        const stock = em.create('Stock', { book, quantity: input.stock ?? 0 })
        return { book, stock }
      })

      timed(reply, await em.flush(), attempt)
      reply.code(201)
      return authorView(
        author,
        created.map(({ book, stock }) => bookView(book, { tags: book.tags.items, stock: stock.quantity })),
      )
    })
  })

  /** A review, and the book's rating (average stars) and review count: recomputed, so retried on a conflict. */
  app.post<{ Params: IdParams; Body: CreateReviewBody }>(
    '/books/:id/reviews',
    { schema: { params: idParams, body: createReviewBody } },
    async (request, reply) => {
      const { stars, body = null, reviewer = null } = request.body
      return retrying(isConcurrencyConflict, async (attempt) => {
        const em = request.em()
        const book = await em.load('Book', toId(request.params.id))
        const review = em.create('Review', { book, stars, body, reviewer })
        book.reviewCount += 1
        book.starsTotal += stars
        book.rating = (book.starsTotal / book.reviewCount).toFixed(2)

        timed(reply, await em.flush(), attempt)
        reply.code(201)
        return { review: reviewView(review), book: { id: book.id, rating: book.rating, reviewCount: book.reviewCount, version: book.version } }
      })
    },
  )

  /** Edits a book the client read at `version`: 409 if it changed since (never retried here). */
  app.patch<{ Params: IdParams; Body: PatchBookBody }>(
    '/books/:id',
    { schema: { params: idParams, body: patchBookBody } },
    async (request, reply) => {
      const { version, ...changes } = request.body
      if (!PATCHABLE.some((field) => changes[field] !== undefined)) {
        throw new HttpError(400, { error: 'invalid request', problems: [{ path: 'body', message: `nothing to change: send at least one of ${PATCHABLE.join(', ')}` }] })
      }
      const em = request.em()
      const book = await em.load('Book', toId(request.params.id))
      if (book.version !== version) {
        throw new HttpError(409, { error: 'stale version', entity: 'Book', ids: [String(book.id)], sentVersion: version, currentVersion: book.version })
      }
      if (changes.title !== undefined) book.title = changes.title
      if (changes.price !== undefined) book.price = changes.price
      if (changes.pages !== undefined) book.pages = changes.pages
      if (changes.published !== undefined) book.published = changes.published

      // A concurrent PATCH that committed after our load fails this flush with OptimisticLockError: 409.
      timed(reply, await em.flush())
      return bookView(book)
    },
  )

  /** Moves books to another author; every id must exist (404 lists the missing ones). */
  app.post<{ Body: MoveBooksBody }>('/books/move', { schema: { body: moveBooksBody } }, async (request, reply) => {
    const { bookIds, toAuthorId } = request.body
    return retrying(isConcurrencyConflict, async (attempt) => {
      const em = request.em()
      // Loads started in one tick share one query per entity.
      const [author, ...found] = await Promise.all([em.tryLoad('Author', toAuthorId), ...bookIds.map((id) => em.tryLoad('Book', id))])
      if (!author) throw new HttpError(404, { error: 'not found', entity: 'Author', id: toAuthorId })
      const missing = bookIds.filter((_, i) => !found[i])
      if (missing.length > 0) throw new HttpError(404, { error: 'not found', entity: 'Book', ids: missing })
      const books = found as Book[]
      const moved = books.filter((book) => book.author !== author)
      for (const book of moved) book.author = author

      timed(reply, await em.flush(), attempt)
      return { toAuthorId, moved: moved.map((b) => b.id), books: books.map((b) => bookView(b)) }
    })
  })

  /** Deletes an author; the database rows of its books, their reviews, tags links and stock go with it. */
  app.delete<{ Params: IdParams }>('/authors/:id', { schema: { params: idParams } }, async (request, reply) => {
    const em = request.em()
    const author = await em.load('Author', toId(request.params.id))
    em.remove(author)
    // One pipeline: set-based deletes of the children (reviews, stock, tag links, books), order lines
    // unlinked (ON DELETE SET NULL), then the author. Its Server-Timing tells how many statements.
    timed(reply, await em.flush())
    return { deleted: { entity: 'Author', id: author.id } }
  })

  /**
   * A checkout in one unit of work over five tables (see placeOrder). The stock read answers a
   * shortage early; the CHECK (quantity >= 0) settles a race for the last copies, and its
   * CheckViolationError becomes the same 409. Deadlocks and the like are still retried.
   *
   * With an Idempotency-Key header, the checkout runs as an idempotent unit of work: its flush also
   * records the key with the response body, so that the same request sent again is answered from the
   * record (201, `Idempotent-Replayed: true`) and writes nothing (see idempotency.ts).
   */
  app.post<{ Body: CheckoutBody }>('/checkout', { schema: { body: checkoutBody } }, async (request, reply) => {
    const key = idempotencyKeyOf(request)
    const input = checkoutInput(request.body)
    if (key === undefined) {
      return retrying(isConcurrencyConflict, async (attempt) => {
        const em = request.em()
        const { order, lines, customer } = await placeOrder(em, input)
        timed(reply, await em.flush().catch(rejectShortage), attempt)
        reply.code(201)
        return { order: orderView(order, lines), customer: customerView(customer) }
      })
    }

    const scoped = `checkout:${key}` // keys are global: this one is the checkout's
    const fingerprinted = fingerprint(request.body)
    const run = await orm
      .unitOfWork(
        async (em): Promise<Recorded> => {
          remember(request, em)
          const { order, lines, customer } = await placeOrder(em, input)
          // The body is recorded before the flush: it holds only what is known now. The ids come
          // from the id pool, createdAt from this process's clock; the customer's order count and
          // version are left out, as the flush's increment sets them on the server.
          await em.assignIds()
          return { request: fingerprinted, body: JSON.stringify({ order: orderView(order, lines), customer: customerSummary(customer) }) }
        },
        { idempotencyKey: scoped, attempts: MAX_ATTEMPTS, retryOn: isConcurrencyConflict },
      )
      // A request sent again after its checkout committed may find the books sold out by that very
      // checkout: orm.unitOfWork then answers from the key's record (replayed), not with this 409.
      .catch(rejectShortage)
    if (run.replayed) return replay(reply, run.value, fingerprinted)
    timed(reply, run.flush!, run.attempts)
    return reply.code(201).type('application/json; charset=utf-8').send(run.value.body)
  })
}

interface CheckoutInput {
  customerId: number
  reference: string | null
  /** Quantity per book, the lines of one book added up. */
  quantities: Map<number, number>
  /** In id order. */
  bookIds: number[]
}

function checkoutInput(body: CheckoutBody): CheckoutInput {
  const quantities = new Map<number, number>()
  for (const line of body.lines) quantities.set(line.bookId, (quantities.get(line.bookId) ?? 0) + line.quantity)
  return { customerId: body.customerId, reference: body.reference ?? null, quantities, bookIds: [...quantities.keys()].sort((a, b) => a - b) }
}

/**
 * Reads the customer, the books and their stock, answers 404 or 409 before anything is written,
 * and makes the changes: an order and its lines (inserts), the stock of each book and the
 * customer's order count (atomic increments: `quantity = quantity - n` on the server, so
 * concurrent checkouts of one book never conflict) and an audit row. The caller flushes.
 */
async function placeOrder(em: EntityManager<Defs>, { customerId, reference, quantities, bookIds }: CheckoutInput): Promise<{ order: Order; lines: OrderLine[]; customer: Customer }> {
  const [customer, books, stocks] = await Promise.all([
    em.load('Customer', customerId),
    Promise.all(bookIds.map((id) => em.tryLoad('Book', id))),
    em.find('Stock', { book: { in: bookIds } }),
  ])
  const missing = bookIds.filter((_, i) => !books[i])
  if (missing.length > 0) throw new HttpError(404, { error: 'not found', entity: 'Book', ids: missing })
  const unpublished = (books as Book[]).filter((b) => !b.published).map((b) => b.id)
  if (unpublished.length > 0) throw new HttpError(409, { error: 'not for sale', entity: 'Book', ids: unpublished })
  const stockOf = new Map<number, Stock>(stocks.map((s) => [s.book.id, s]))
  const shortages = bookIds
    .map((id) => ({ bookId: id, requested: quantities.get(id)!, available: stockOf.get(id)?.quantity ?? 0 }))
    .filter((s) => s.requested > s.available)
  if (shortages.length > 0) throw new HttpError(409, { error: 'insufficient stock', problems: shortages })

  let total = 0
  const order = em.create('Order', { customer, reference, total: '0' })
  const lines = (books as Book[]).map((book) => {
    const quantity = quantities.get(book.id)!
    total += toCents(book.price) * quantity
    em.increment(stockOf.get(book.id)!, 'quantity', -quantity)
    return em.create('OrderLine', { order, book, title: book.title, quantity, unitPrice: book.price })
  })
  order.total = fromCents(total)
  em.increment(customer, 'orderCount', 1)
  em.create('AuditLog', {
    order,
    action: 'checkout',
    subject: `customer:${customer.id}`,
    detail: { reference, total: order.total, lines: lines.map((l) => ({ bookId: l.book!.id, quantity: l.quantity })) },
  })
  return { order, lines, customer }
}

/** Another checkout took the last copies after this one read the stock: the same 409 as a shortage read. */
function rejectShortage(error: unknown): never {
  if (error instanceof CheckViolationError && error.constraint === 'stock_quantity_check') {
    throw new HttpError(409, { error: 'insufficient stock', constraint: error.constraint })
  }
  throw error
}
