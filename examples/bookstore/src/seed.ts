/**
 * A little data to try the API with. Idempotent: authors and customers are keyed by email and only
 * the missing ones are created, tags by name; a second run creates nothing (and flushes nothing).
 */
import type { Flushwave } from 'flushwave'
import type { Defs, Tag } from './schema.js'

interface SeedBook {
  title: string
  price: string
  pages: number
  tags: string[]
}

const AUTHORS: { name: string; email: string; books: SeedBook[] }[] = [
  {
    name: 'Ursula K. Le Guin',
    email: 'ursula@example.com',
    books: [
      { title: 'The Dispossessed', price: '14.99', pages: 387, tags: ['science fiction', 'classic'] },
      { title: 'The Left Hand of Darkness', price: '13.50', pages: 304, tags: ['science fiction', 'classic'] },
      { title: 'A Wizard of Earthsea', price: '9.99', pages: 183, tags: ['fantasy'] },
    ],
  },
  {
    name: 'Octavia E. Butler',
    email: 'octavia@example.com',
    books: [
      { title: 'Kindred', price: '12.00', pages: 264, tags: ['science fiction', 'classic'] },
      { title: 'Parable of the Sower', price: '11.25', pages: 345, tags: ['science fiction'] },
    ],
  },
  {
    name: 'Terry Pratchett',
    email: 'terry@example.com',
    books: [
      { title: 'Small Gods', price: '10.99', pages: 284, tags: ['fantasy', 'satire'] },
      { title: 'Guards! Guards!', price: '10.99', pages: 288, tags: ['fantasy', 'satire'] },
      { title: 'Mort', price: '9.50', pages: 272, tags: ['fantasy', 'satire'] },
    ],
  },
  {
    name: 'Italo Calvino',
    email: 'italo@example.com',
    books: [
      { title: 'Invisible Cities', price: '11.00', pages: 165, tags: ['literary', 'classic'] },
      { title: "If on a winter's night a traveler", price: '12.50', pages: 260, tags: ['literary'] },
    ],
  },
  {
    name: 'Stanisław Lem',
    email: 'stanislaw@example.com',
    books: [
      { title: 'Solaris', price: '13.00', pages: 204, tags: ['science fiction', 'classic'] },
      { title: 'The Cyberiad', price: '12.75', pages: 295, tags: ['science fiction', 'satire'] },
    ],
  },
]

const CUSTOMERS = Array.from({ length: 20 }, (_, i) => ({ name: `Reader ${i + 1}`, email: `reader${i + 1}@example.com` }))

/** Plenty, so that load runs of POST /checkout do not sell out. */
const STOCK = 1_000_000

export interface SeedResult {
  created: Record<string, number>
  /** Ids for the example commands. */
  authorId: number
  bookIds: number[]
  customerId: number
}

export async function seed(orm: Flushwave<Defs>): Promise<SeedResult> {
  const em = orm.em()
  const [authors, customers, tags] = await Promise.all([
    em.find('Author', { email: { in: AUTHORS.map((a) => a.email) } }),
    em.find('Customer', { email: { in: CUSTOMERS.map((c) => c.email) } }),
    em.find('Tag', { name: { in: [...new Set(AUTHORS.flatMap((a) => a.books.flatMap((b) => b.tags)))] } }),
  ])
  const haveAuthor = new Set(authors.map((a) => a.email))
  const haveCustomer = new Set(customers.map((c) => c.email))
  const tagByName = new Map<string, Tag>(tags.map((t) => [t.name, t]))
  const tag = (name: string): Tag => tagByName.get(name) ?? tagByName.set(name, em.create('Tag', { name })).get(name)!

  for (const a of AUTHORS.filter((a) => !haveAuthor.has(a.email))) {
    const author = em.create('Author', { name: a.name, email: a.email })
    a.books.forEach((b, i) => {
      const book = em.create('Book', { author, title: b.title, price: b.price, pages: b.pages, published: true, tags: b.tags.map(tag) })
      em.create('Stock', { book, quantity: STOCK })
      // A first review for some of them, with the book's rating to match.
      if (i === 0) {
        em.create('Review', { book, stars: 5, reviewer: 'seed', body: 'A classic.' })
        book.reviewCount = 1
        book.starsTotal = 5
        book.rating = '5.00'
      }
    })
  }
  for (const c of CUSTOMERS.filter((c) => !haveCustomer.has(c.email))) em.create('Customer', c)

  const result = await em.flush()

  // The ids of the first author's books and of the first customer, for the printed commands.
  const [first] = await em.find('Author', { email: AUTHORS[0]!.email })
  const books = first ? await em.find('Book', { author: first }, { orderBy: { id: 'asc' } }) : []
  const [customer] = await em.find('Customer', { email: CUSTOMERS[0]!.email })
  return { created: result.inserted, authorId: first!.id, bookIds: books.map((b) => b.id), customerId: customer!.id }
}
