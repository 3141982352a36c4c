/** The rows a unit of work writes, as plain data every series turns into its own entities. */
export interface Graph {
  readonly authors: readonly { firstName: string; lastName: string; email: string }[]
  /** `author` indexes into `authors`. */
  readonly books: readonly { title: string; pages: number; author: number }[]
  readonly reviews: readonly { rating: number; text: string; book: number }[]
  readonly tags: readonly { name: string }[]
  /** Pairs of indexes into `books` and `tags`. */
  readonly bookTags: readonly { book: number; tag: number }[]
}

export const BOOKS_PER_AUTHOR = 10
export const REVIEWS_PER_BOOK = 10
export const TAGS_PER_BOOK = 5

/** n authors, each with 10 books, 10 reviews per book and 5 tags per book (as joist-benchmarks). */
export function graph(n: number, marker: string): Graph {
  const authors = Array.from({ length: n }, (_, a) => ({ firstName: `first${a}`, lastName: `last${a}`, email: `a${a}-${marker}@example.com` }))
  const books = authors.flatMap((_, a) => Array.from({ length: BOOKS_PER_AUTHOR }, (_, b) => ({ title: `book ${a}.${b}`, pages: 100 + b, author: a })))
  const reviews = books.flatMap((_, b) => Array.from({ length: REVIEWS_PER_BOOK }, (_, r) => ({ rating: 1 + (r % 5), text: `review ${b}.${r}`, book: b })))
  const tags = books.flatMap((_, b) => Array.from({ length: TAGS_PER_BOOK }, (_, t) => ({ name: `tag ${b}.${t}-${marker}` })))
  const bookTags = books.flatMap((_, b) => Array.from({ length: TAGS_PER_BOOK }, (_, t) => ({ book: b, tag: b * TAGS_PER_BOOK + t })))
  return { authors, books, reviews, tags, bookTags }
}

export function graphRows(g: Graph): Record<string, number> {
  return { author: g.authors.length, book: g.books.length, book_review: g.reviews.length, tag: g.tags.length, book_tag: g.bookTags.length }
}
