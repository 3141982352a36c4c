import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EntityStateError, type EntityOf } from '../../src/index.js'
import { stateOf } from '../../src/entities/entity-state.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { rolledBackChanges, seededRandom } from '../support/random-steps.js'

type Tag = EntityOf<typeof bookstore, 'Tag'>

/**
 * `em.upsert` by a unique key against a model of what it must find: the tag this EntityManager
 * holds with that name (returned, or an error when it is removed or newly created), else a new
 * one. Random upserts, renames (the key changed by a setter), removes, creates, flushes and
 * rolled-back transactions; its key index is first used at a random step. After every flush the
 * table must hold the live tags' names.
 */
let db: TestDatabase<typeof bookstore.defs>
beforeAll(async () => {
  db = await testDatabase(bookstore, { name: 'upsert_model' })
})
afterAll(() => db.close())

const SEEDS = 16
const STEPS = 120
const NAMES = 8

describe('em.upsert against a model', () => {
  for (let seed = 1; seed <= SEEDS; seed++) {
    it(`finds what the model finds through ${STEPS} random steps (seed ${seed})`, async () => {
      const name = (i: number) => `upsert ${seed} name ${i}`
      const setup = db.orm.em()
      for (let i = 0; i < NAMES / 2; i++) setup.create('Tag', { name: name(i) })
      await setup.flush()

      const em = db.orm.em()
      const next = seededRandom(seed)
      const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(next() * xs.length)]
      const tags: Tag[] = await em.find('Tag', { name: { in: Array.from({ length: NAMES }, (_, i) => name(i)) } })
      const log: string[] = []
      const status = (t: Tag) => stateOf(t)!.status
      const holder = (n: string) => tags.findLast((t) => status(t) !== 'detached' && stateOf(t)!.values.name === n)
      // The row that has the name now, as this EntityManager last wrote or read it. A name a rename
      // gives up stays taken until the flush: another row takes it only in a later flush (PostgreSQL
      // checks a unique key row by row, and Flushwave refuses an insert or upsert of it).
      const rowHolder = (n: string) => tags.find((t) => (status(t) === 'managed' || status(t) === 'removed') && stateOf(t)!.snapshot?.name === n)
      const free = (n: string) => !holder(n) && !rowHolder(n)
      // Held only by a removed tag whose row has it: a create replaces that row (deleted first).
      const replaceable = (n: string) => {
        const h = holder(n)
        return h !== undefined && status(h) === 'removed' && rowHolder(n) === h && tags.filter((t) => stateOf(t)!.snapshot?.name === n).length === 1
      }
      const firstUpsert = Math.floor(next() * STEPS * 0.5) // the key index is made then, or inside a transaction before

      const change = async (inside: boolean, step: number) => {
        const r = next()
        const n = name(Math.floor(next() * NAMES))
        const live = tags.filter((t) => status(t) === 'new' || status(t) === 'managed')
        if (r < 0.4 && (inside || step >= firstUpsert) && (holder(n) || free(n))) {
          const held = holder(n)
          log.push(`upsert ${n} (held by ${held ? status(held) : 'none'})`)
          if (held && (status(held) === 'removed' || (status(held) === 'new' && stateOf(held)!.upsert === undefined))) {
            expect(() => em.upsert('Tag', { name: n }, { onConflict: 'name' }), log.join('; ')).toThrow(EntityStateError)
          } else {
            const got = em.upsert('Tag', { name: n }, { onConflict: 'name' })
            if (held) expect(got, log.join('; ')).toBe(held)
            else {
              expect(tags.includes(got), log.join('; ')).toBe(false)
              tags.push(got)
            }
          }
        } else if (r < 0.6) {
          const tag = pick(live.filter((t) => stateOf(t)!.upsert === undefined))
          if (tag && free(n)) {
            log.push(`rename ${tag.name} to ${n}`)
            tag.name = n
          }
        } else if (r < 0.75) {
          const tag = pick(live)
          if (tag) {
            log.push(`remove ${tag.name}`)
            em.remove(tag)
          }
        } else if (r < 0.9) {
          if (free(n) || replaceable(n)) {
            log.push(`create ${n}${free(n) ? '' : ' (replacing a removed row)'}`)
            tags.push(em.create('Tag', { name: n }))
          }
        } else if (inside) {
          const tag = pick(live.filter((t) => status(t) === 'managed'))
          if (tag) {
            log.push(`locking read of ${tag.name}`)
            await em.load('Tag', tag.id, { lock: 'update' })
          }
        }
      }
      const checkTable = async () => {
        const rows = await db.sql`select name from tag where name like ${`upsert ${seed} %`}`
        const model = tags.filter((t) => status(t) === 'managed').map((t) => t.name)
        expect(rows.map((row) => row.name as string).sort(), log.join('; ')).toEqual(model.sort())
      }

      for (let step = 0; step < STEPS; step++) {
        const r = next()
        if (r < 0.65) await change(false, step)
        else if (r < 0.8) {
          log.push('flush')
          await em.flush()
          await checkTable()
        } else if (r < 0.9) {
          await rolledBackChanges(em, next, () => change(true, step), log)
        }
      }
      await em.flush()
      await checkTable()
    })
  }
})
