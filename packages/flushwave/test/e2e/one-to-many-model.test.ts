import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stateOf } from '../../src/entities/entity-state.js'
import { bookstore, type Author, type Book } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { rolledBackChanges, seededRandom } from '../support/random-steps.js'

/**
 * A one-to-many collection against a model of what it must hold: every tracked book whose author
 * is the owner, neither removed nor detached. Random moves, adds, removes, creates, loads, flushes
 * and rolled-back transactions, with the collections first read at random moments (their index is
 * made then), and `items` and `has()` checked against the model after each step.
 */
let db: TestDatabase<typeof bookstore.defs>
beforeAll(async () => {
  db = await testDatabase(bookstore, { name: 'one_to_many_model' })
})
afterAll(() => db.close())

const SEEDS = 16
const STEPS = 120

describe('a one-to-many collection against a model', () => {
  for (let seed = 1; seed <= SEEDS; seed++) {
    it(`agrees with the model through ${STEPS} random steps (seed ${seed})`, async () => {
      const setup = db.orm.em()
      const made = Array.from({ length: 3 }, (_, i) => setup.create('Author', { name: `model ${seed}.${i}` }))
      for (let i = 0; i < 6; i++) setup.create('Book', { title: `model ${seed} book ${i}`, author: made[i % 3]! })
      await setup.flush()

      const em = db.orm.em()
      const next = seededRandom(seed)
      const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(next() * xs.length)]
      const authors: Author[] = await em.find('Author', { id: { in: made.map((a) => a.id) } })
      authors.push(em.create('Author', { name: `model ${seed} here` })) // created here: loaded from the start
      const books: Book[] = await em.find('Book', { author: { in: made.map((a) => a.id) } })
      let created = 0
      const live = () => books.filter((b) => ['new', 'managed'].includes(stateOf(b)!.status))
      const log: string[] = []

      // The collections' first read, which makes their index, comes at a random step: before it,
      // only a `read` inside a transaction reads them (then the index is made inside it).
      const firstRead = Math.floor(next() * STEPS * 0.6)
      let reading = false
      const check = () => {
        if (!reading) return
        for (const author of authors) {
          if (!author.books.isLoaded) continue
          const model = books.filter((b) => {
            const s = stateOf(b)!
            return s.values.author === author && s.status !== 'removed' && s.status !== 'detached'
          })
          expect(new Set(author.books.items), log.join('; ')).toEqual(new Set(model))
          for (const b of books) expect(author.books.has(b), log.join('; ')).toBe(model.includes(b))
        }
      }
      /** One change, of the kinds a transaction's callback makes too (a locking read only there). */
      const change = async (inside: boolean) => {
        const r = next()
        const book = pick(live())
        const author = pick(authors)!
        if (r < 0.25 && book) {
          log.push(`move ${book.title} to ${author.name}`)
          book.author = author
        } else if (r < 0.35 && book) {
          log.push(`assign ${book.title} to ${author.name}`)
          em.assign(book, { author })
        } else if (r < 0.5 && book && author.books.isLoaded) {
          log.push(`add ${book.title} to ${author.name}`)
          author.books.add(book)
        } else if (r < 0.62 && book) {
          log.push(`remove ${book.title}`)
          em.remove(book)
        } else if (r < 0.74) {
          const title = `model ${seed} made ${++created}`
          log.push(`create ${title} for ${author.name}`)
          books.push(em.create('Book', { title, author }))
        } else if (r < 0.86 && inside && book && stateOf(book)!.status === 'managed') {
          // Reads the row again (its unflushed changes stay) and locks it.
          log.push(`locking read of ${book.title}`)
          await em.load('Book', book.id, { lock: 'update' })
        } else if (inside || reading) {
          log.push('read')
          reading = true
          check()
        }
      }

      for (let step = 0; step < STEPS; step++) {
        const r = next()
        if (r < 0.55) await change(false)
        else if (r < 0.65) {
          const author = pick(authors.filter((a) => !a.books.isLoaded))
          if (author) {
            log.push(`populate ${author.name}`)
            await em.populate(author, 'books')
          }
        } else if (r < 0.75) {
          log.push('flush')
          await em.flush()
        } else if (r < 0.85) {
          await rolledBackChanges(em, next, () => change(true), log)
        }
        if (step >= firstRead) reading = true
        check()
      }
      await em.flush()
      // What the collections held is what the table holds.
      const rows = await db.sql`select title, author_id::int as author from book where title like ${`model ${seed} %`}`
      const model = books.filter((b) => stateOf(b)!.status === 'managed').map((b) => ({ title: b.title, author: b.author.id }))
      const sorted = (xs: readonly { title: string; author: number }[]) => xs.map((x) => `${x.title} / ${x.author}`).sort()
      expect(sorted(rows as never)).toEqual(sorted(model))
    })
  }
})
