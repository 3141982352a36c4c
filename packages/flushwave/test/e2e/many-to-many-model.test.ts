import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { EntityOf } from '../../src/index.js'
import { stateOf } from '../../src/entities/entity-state.js'
import { bookstore, type Book } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { rolledBackChanges, seededRandom } from '../support/random-steps.js'

type Tag = EntityOf<typeof bookstore, 'Tag'>

/**
 * A many-to-many collection against a model of its links: random adds and removes (on loaded and
 * unloaded collections), removed and created tags and books, loads, flushes and rolled-back
 * transactions. After each step a loaded collection's `items` and `has()` must give the model's
 * links to tags neither removed nor detached, and after every flush the link table must hold the
 * model's links between rows that exist.
 */
let db: TestDatabase<typeof bookstore.defs>
beforeAll(async () => {
  db = await testDatabase(bookstore, { name: 'many_to_many_model' })
})
afterAll(() => db.close())

const SEEDS = 16
const STEPS = 120
const live = (x: object) => ['new', 'managed'].includes(stateOf(x)!.status)

describe('a many-to-many collection against a model', () => {
  for (let seed = 1; seed <= SEEDS; seed++) {
    it(`agrees with the model through ${STEPS} random steps (seed ${seed})`, async () => {
      const setup = db.orm.em()
      const author = setup.create('Author', { name: `m2m model ${seed}` })
      const setupTags = Array.from({ length: 5 }, (_, i) => setup.create('Tag', { name: `m2m ${seed} tag ${i}` }))
      for (let i = 0; i < 3; i++) setup.create('Book', { title: `m2m ${seed} book ${i}`, author, tags: setupTags.filter((_, k) => (k + i) % 2 === 0) })
      await setup.flush()

      const em = db.orm.em()
      const next = seededRandom(seed)
      const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(next() * xs.length)]
      const owner = await em.load('Author', author.id)
      const books: Book[] = await em.find('Book', { author: author.id })
      const tags: Tag[] = await em.find('Tag', { id: { in: setupTags.map((t) => t.id) } })
      // The model: every book's links, as the table holds them now.
      const links = new Map<Book, Set<Tag>>(books.map((b) => [b, new Set()]))
      for (const row of await db.sql`select book_id::int as book, tag_id::int as tag from book_tag where book_id = any(${books.map((b) => b.id)}::int8[])`) {
        links.get(books.find((b) => b.id === row.book)!)!.add(tags.find((t) => t.id === row.tag)!)
      }
      let made = 0
      const log: string[] = []

      const check = () => {
        for (const book of books) {
          if (!live(book) || !book.tags.isLoaded) continue
          const model = [...links.get(book)!].filter(live)
          expect(new Set(book.tags.items), log.join('; ')).toEqual(new Set(model))
          for (const tag of tags) expect(book.tags.has(tag), log.join('; ')).toBe(model.includes(tag))
        }
      }
      const checkTable = async () => {
        const rows = await db.sql`select b.title, t.name from book_tag j join book b on b.id = j.book_id join tag t on t.id = j.tag_id where b.author_id = ${author.id}`
        const model = [...links]
          .filter(([b]) => stateOf(b)!.status === 'managed')
          .flatMap(([b, ts]) => [...ts].filter((t) => stateOf(t)!.status === 'managed').map((t) => ({ title: b.title, name: t.name })))
        const sorted = (xs: readonly { title: string; name: string }[]) => xs.map((x) => `${x.title} / ${x.name}`).sort()
        expect(sorted(rows as never), log.join('; ')).toEqual(sorted(model))
      }
      /** One change, of the kinds a transaction's callback makes too (loads there as well). */
      const change = async (inside: boolean) => {
        const r = next()
        const book = pick(books.filter(live))
        const tag = pick(tags.filter(live))
        if (inside && r < 0.1 && book && !book.tags.isLoaded) {
          log.push(`populate ${book.title} inside`)
          await em.populate(book, 'tags')
        } else if (inside && r < 0.2 && book && stateOf(book)!.status === 'managed') {
          log.push(`locking read of ${book.title}`)
          await em.load('Book', book.id, { lock: 'update' })
        } else if (r < 0.35 && book && tag) {
          log.push(`add ${tag.name} to ${book.title}`)
          book.tags.add(tag)
          links.get(book)!.add(tag)
        } else if (r < 0.65 && book && tag) {
          log.push(`remove ${tag.name} from ${book.title}`)
          book.tags.remove(tag)
          links.get(book)!.delete(tag)
        } else if (r < 0.72 && tag) {
          log.push(`remove tag ${tag.name}`)
          em.remove(tag)
        } else if (r < 0.77 && book) {
          log.push(`remove book ${book.title}`)
          em.remove(book)
        } else if (r < 0.87) {
          const name = `m2m ${seed} made tag ${++made}`
          log.push(`create ${name}`)
          tags.push(em.create('Tag', { name }))
        } else {
          const title = `m2m ${seed} made book ${++made}`
          const with_ = tags.filter(live).filter(() => next() < 0.3)
          log.push(`create ${title} with ${with_.map((t) => t.name).join(', ')}`)
          const created = em.create('Book', { title, author: owner, tags: with_ })
          books.push(created)
          links.set(created, new Set(with_))
        }
      }

      for (let step = 0; step < STEPS; step++) {
        const r = next()
        if (r < 0.55) await change(false)
        else if (r < 0.65) {
          const book = pick(books.filter((b) => live(b) && !b.tags.isLoaded))
          if (book) {
            log.push(`populate ${book.title}`)
            await em.populate(book, 'tags')
          }
        } else if (r < 0.75) {
          log.push('flush')
          await em.flush()
          await checkTable()
        } else if (r < 0.85) {
          const saved = new Map([...links].map(([b, ts]) => [b, new Set(ts)]))
          await rolledBackChanges(em, next, () => change(true), log)
          links.clear()
          for (const [b, ts] of saved) links.set(b, ts)
        }
        check()
      }
      await em.flush()
      await checkTable()
    })
  }
})
