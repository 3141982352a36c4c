/**
 * The bookstore's entities. The tables are created by the knex migrations in ../migrations, which
 * `flushwave migrate generate --knex` wrote from this module (test/migrations.test.ts checks that
 * they make exactly what `createTablesSql(schema)` makes, and that none is missing).
 */
import { defineSchema, entity, t, type EntityOf, type Hooks } from 'flushwave'

const nonNegative = (value: string): string | undefined => (Number(value) >= 0 ? undefined : 'must not be negative')

export const schema = defineSchema({
  Author: entity('author', {
    id: t.id(),
    name: t.text().length({ min: 1, max: 200 }),
    email: t.text().nullable().unique(),
    createdAt: t.timestamptz().defaultNow(),
    books: t.oneToMany('Book', 'author'),
  }),
  Book: entity('book', {
    id: t.id(),
    title: t.text().length({ min: 1, max: 300 }),
    price: t.numeric().check(nonNegative).checkSql('price >= 0'),
    pages: t.integer().nullable().range({ min: 1 }).checkSql('pages >= 1'),
    published: t.boolean().default(false),
    /** Average of the reviews' stars, two decimals: starsTotal / reviewCount. */
    rating: t.numeric().default('0.00'),
    reviewCount: t.integer().default(0),
    starsTotal: t.integer().default(0),
    version: t.version(),
    author: t.manyToOne('Author').onDelete('cascade'),
    reviews: t.oneToMany('Review', 'book'),
    stock: t.oneToMany('Stock', 'book'),
    tags: t.manyToMany('Tag', { table: 'book_tags' }),
  }),
  Review: entity('review', {
    id: t.id(),
    stars: t.integer().range({ min: 1, max: 5 }).checkSql('stars between 1 and 5'),
    body: t.text().nullable(),
    reviewer: t.text().nullable(),
    createdAt: t.timestamptz().defaultNow(),
    book: t.manyToOne('Book').onDelete('cascade'),
  }),
  Tag: entity('tag', {
    id: t.id(),
    name: t.text().unique().length({ min: 1, max: 40 }),
  }),
  Customer: entity('customer', {
    id: t.id(),
    name: t.text(),
    email: t.text().unique(),
    orderCount: t.integer().default(0),
    version: t.version(),
    orders: t.oneToMany('Order', 'customer'),
  }),
  Order: entity('order', {
    id: t.id(),
    /** The client's idempotency key: a second checkout with the same one fails whole. */
    reference: t.text().nullable().unique(),
    status: t.enum('order_status', ['placed', 'shipped', 'cancelled']).default('placed'),
    total: t.numeric(),
    createdAt: t.timestamptz().defaultNow(),
    customer: t.manyToOne('Customer'),
    lines: t.oneToMany('OrderLine', 'order'),
  }),
  OrderLine: entity('order_line', {
    id: t.id(),
    order: t.manyToOne('Order').onDelete('cascade'),
    /** Null once the book is deleted; title and price stay as they were sold. */
    book: t.manyToOne('Book').nullable().onDelete('set null'),
    title: t.text(),
    quantity: t.integer().range({ min: 1, max: 100 }).checkSql('quantity between 1 and 100'),
    unitPrice: t.numeric(),
  }),
  /** One row per book, never below zero: the last line of defence of POST /checkout. */
  Stock: entity(
    'stock',
    {
      id: t.id(),
      book: t.manyToOne('Book').onDelete('cascade'),
      quantity: t.integer().checkSql('quantity >= 0'),
      version: t.version(),
    },
    { unique: [['book']] },
  ),
  AuditLog: entity('audit_log', {
    id: t.id(),
    action: t.text(),
    subject: t.text(),
    detail: t.jsonb<Record<string, unknown>>(),
    createdAt: t.timestamptz().defaultNow(),
    /** The order a checkout created: inserted in the same flush, after it (the id is not known before). */
    order: t.manyToOne('Order').nullable().onDelete('set null'),
  }),
})

export type Defs = typeof schema.defs
export type Author = EntityOf<typeof schema, 'Author'>
export type Book = EntityOf<typeof schema, 'Book'>
export type Review = EntityOf<typeof schema, 'Review'>
export type Tag = EntityOf<typeof schema, 'Tag'>
export type Customer = EntityOf<typeof schema, 'Customer'>
export type Order = EntityOf<typeof schema, 'Order'>
export type OrderLine = EntityOf<typeof schema, 'OrderLine'>
export type Stock = EntityOf<typeof schema, 'Stock'>

/** Rules JSON schema cannot state, because they span fields (and PATCH sends only some of them). */
export const hooks: Hooks<Defs> = {
  entities: {
    Book: {
      validate: (book) => (book.published && Number(book.price) <= 0 ? 'a published book must have a price above 0' : undefined),
    },
  },
}
