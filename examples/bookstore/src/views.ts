/** The JSON shapes of the responses, built from entities (whose own toJSON shows every column). */
import type { EntityManager } from 'flushwave'
import type { Author, Book, Customer, Defs, Order, OrderLine, Review, Tag } from './schema.js'

export interface BookView {
  id: number
  title: string
  price: string
  pages: number | null
  published: boolean
  rating: string
  reviewCount: number
  version: number
  authorId: number
  tags?: string[]
  stock?: number
}

export function bookView(book: Book, extra: { tags?: readonly Tag[]; stock?: number } = {}): BookView {
  return {
    id: book.id,
    title: book.title,
    price: book.price,
    pages: book.pages,
    published: book.published,
    rating: book.rating,
    reviewCount: book.reviewCount,
    version: book.version,
    authorId: book.author.id,
    ...(extra.tags ? { tags: extra.tags.map((t) => t.name).sort() } : {}),
    ...(extra.stock === undefined ? {} : { stock: extra.stock }),
  }
}

/** A loaded book whose tags and stock are populated (see populateBooks). */
export function fullBookView(book: Book): BookView {
  return bookView(book, { tags: book.tags.items, stock: book.stock.items[0]?.quantity ?? 0 })
}

export function authorView(author: Author, books?: readonly BookView[]) {
  return {
    id: author.id,
    name: author.name,
    email: author.email,
    createdAt: author.createdAt.toISOString(),
    ...(books ? { books } : {}),
  }
}

export function reviewView(review: Review) {
  return {
    id: review.id,
    bookId: review.book.id,
    stars: review.stars,
    body: review.body,
    reviewer: review.reviewer,
    createdAt: review.createdAt.toISOString(),
  }
}

export function customerView(customer: Customer) {
  return { id: customer.id, name: customer.name, email: customer.email, orderCount: customer.orderCount, version: customer.version }
}

/**
 * The customer as a checkout with an Idempotency-Key answers it: the body is recorded before the
 * flush, whose increment sets the order count and the version on the server, so they are left out.
 */
export function customerSummary(customer: Customer) {
  return { id: customer.id, name: customer.name, email: customer.email }
}

export function orderView(order: Order, lines: readonly OrderLine[]) {
  return {
    id: order.id,
    reference: order.reference,
    status: order.status,
    total: order.total,
    customerId: order.customer.id,
    createdAt: order.createdAt.toISOString(),
    lines: lines.map((line) => ({
      id: line.id,
      bookId: line.book?.id ?? null,
      title: line.title,
      quantity: line.quantity,
      unitPrice: line.unitPrice,
    })),
  }
}

/** What fullBookView reads of a book's relations: populate them with a find, or with populateBooks. */
export const BOOK_RELATIONS = ['tags', 'stock'] as const

/** Loads what fullBookView reads, for many books at once (one query per relation). */
export async function populateBooks(em: EntityManager<Defs>, books: readonly Book[]): Promise<void> {
  await em.populate(books, ...BOOK_RELATIONS)
}

/** Exact decimal arithmetic on money strings with at most two decimals. */
export function toCents(price: string): number {
  const [whole = '0', fraction = ''] = price.split('.')
  return Number(whole) * 100 + Number(fraction.padEnd(2, '0').slice(0, 2))
}

export function fromCents(cents: number): string {
  return `${Math.trunc(cents / 100)}.${String(cents % 100).padStart(2, '0')}`
}
