/**
 * JSON schemas of the request bodies, parameters and query strings, checked by Fastify's Ajv with
 * `allErrors: true` (every problem is reported, not only the first). Fastify's docs warn that
 * allErrors lets a huge body cost a lot of validation work: every string and array here has a
 * maximum, and the body limit is small (see app.ts).
 *
 * Types are coerced nowhere (`coerceTypes: false`): `"stars": "5"` or `"published": 1` is an error,
 * so path parameters and query values are strings with a pattern, turned into numbers by `toId`.
 *
 * Money (`price`) travels as a decimal string such as "12.50", as Flushwave's `t.numeric()` does.
 */

/** A row id: a positive JSON integer within Number.MAX_SAFE_INTEGER. */
const id = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } as const
const idString = { type: 'string', pattern: '^[1-9][0-9]{0,14}$' } as const
const price = { type: 'string', pattern: '^(0|[1-9][0-9]{0,7})(\\.[0-9]{1,2})?$', description: 'a decimal string, e.g. "12.50"' } as const
const title = { type: 'string', minLength: 1, maxLength: 300 } as const
const pages = { type: ['integer', 'null'], minimum: 1, maximum: 100_000 } as const
const tagName = { type: 'string', minLength: 1, maxLength: 40 } as const

export const idParams = {
  type: 'object',
  additionalProperties: false,
  required: ['id'],
  properties: { id: idString },
} as const
export interface IdParams {
  id: string
}

export const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'string', pattern: '^[1-9][0-9]{0,2}$' },
    authorId: idString,
    published: { type: 'string', enum: ['true', 'false'] },
  },
} as const
/** GET /books/search: filters across relations, a page size and the cursor of the page before. */
export const searchQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    author: { type: 'string', minLength: 1, maxLength: 100 },
    tag: { type: 'string', minLength: 1, maxLength: 40 },
    minStars: { type: 'string', pattern: '^[1-5]$' },
    first: { type: 'string', pattern: '^[1-9][0-9]?$' },
    after: { type: 'string', minLength: 1, maxLength: 2000 },
  },
} as const
export interface SearchQuery {
  author?: string
  tag?: string
  minStars?: string
  first?: string
  after?: string
}

export interface ListQuery {
  limit?: string
  authorId?: string
  published?: 'true' | 'false'
}

export const createAuthorBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 200 },
    email: { type: 'string', format: 'email', maxLength: 200 },
    books: {
      type: 'array',
      maxItems: 50,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['title', 'price'],
        properties: {
          title,
          price,
          pages,
          published: { type: 'boolean' },
          tags: { type: 'array', maxItems: 20, items: tagName },
          stock: { type: 'integer', minimum: 0, maximum: 10_000_000 },
        },
      },
    },
  },
} as const
export interface CreateAuthorBody {
  name: string
  email?: string
  books?: {
    title: string
    price: string
    pages?: number | null
    published?: boolean
    tags?: string[]
    stock?: number
  }[]
}

export const createReviewBody = {
  type: 'object',
  additionalProperties: false,
  required: ['stars'],
  properties: {
    stars: { type: 'integer', minimum: 1, maximum: 5 },
    body: { type: 'string', maxLength: 5000 },
    reviewer: { type: 'string', minLength: 1, maxLength: 100 },
  },
} as const
export interface CreateReviewBody {
  stars: number
  body?: string
  reviewer?: string
}

/** PATCH /books/:id: the version the client read, and the fields to change (at least one). */
export const patchBookBody = {
  type: 'object',
  additionalProperties: false,
  required: ['version'],
  properties: {
    version: { type: 'integer', minimum: 1, maximum: 2_147_483_647 },
    title,
    price,
    pages,
    published: { type: 'boolean' },
  },
} as const
export interface PatchBookBody {
  version: number
  title?: string
  price?: string
  pages?: number | null
  published?: boolean
}
export const PATCHABLE = ['title', 'price', 'pages', 'published'] as const

export const moveBooksBody = {
  type: 'object',
  additionalProperties: false,
  required: ['bookIds', 'toAuthorId'],
  properties: {
    bookIds: { type: 'array', minItems: 1, maxItems: 100, uniqueItems: true, items: id },
    toAuthorId: id,
  },
} as const
export interface MoveBooksBody {
  bookIds: number[]
  toAuthorId: number
}

export const checkoutBody = {
  type: 'object',
  additionalProperties: false,
  required: ['customerId', 'lines'],
  properties: {
    customerId: id,
    /** An idempotency key: a second checkout with the same reference fails whole (409). */
    reference: { type: 'string', minLength: 1, maxLength: 100 },
    lines: {
      type: 'array',
      minItems: 1,
      maxItems: 20,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['bookId', 'quantity'],
        properties: { bookId: id, quantity: { type: 'integer', minimum: 1, maximum: 100 } },
      },
    },
  },
} as const
export interface CheckoutBody {
  customerId: number
  reference?: string
  lines: { bookId: number; quantity: number }[]
}

/** A validated id parameter as a number. */
export function toId(value: string): number {
  return Number(value)
}
