import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, EntityStateError, t, UniqueViolationError, type EntityOf, type FlushResult } from '../../src/index.js'
import { stateOf } from '../../src/entities/entity-state.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { seededRandom } from '../support/random-steps.js'

/**
 * Unique values passed on between rows in one flush, against a model of what must happen. Random
 * steps rename a few rows at once with a shuffle of their own codes, codes no row holds any more
 * and fresh ones (which makes chains, and cycles: swaps and longer), create rows with fresh or
 * freed codes, remove rows, and flush. At each flush the model predicts, from the rows as last
 * committed:
 *
 * - a created row taking a code that an updated row gives up: `EntityStateError`, nothing sent;
 * - updated rows taking each other's codes in a cycle: `UniqueViolationError`, nothing committed
 *   (the constraint is checked row by row, and no order of UPDATEs passes a cycle);
 * - otherwise it commits: a removed row whose code is taken is deleted first, and updated rows go
 *   one UPDATE per level of the longest chain through them, after one statement that locks them
 *   all in id order.
 *
 * After every flush the table must hold the model's rows (a failed flush: as before it), and a
 * failed flush is then mended (one offending row gets a fresh code) and flushed again.
 */
const schema = defineSchema({
  Item: entity('passing_item', { id: t.id(), code: t.text().unique(), version: t.version() }),
})
type Item = EntityOf<typeof schema, 'Item'>

let db: TestDatabase<typeof schema.defs>
beforeAll(async () => {
  db = await testDatabase(schema, { name: 'unique_passes' })
})
afterAll(() => db.close())

const SEEDS = 16
const STEPS = 80
const ROWS = 6

interface Row {
  readonly code: string
  readonly version: number
}

describe('unique values passed on between rows, against a model', () => {
  for (let seed = 1; seed <= SEEDS; seed++) {
    it(`commits or refuses as the model says through ${STEPS} random steps (seed ${seed})`, async () => {
      const next = seededRandom(seed)
      const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(next() * xs.length)]
      let fresh = 0
      const freshCode = () => `s${seed}-${fresh++}`
      const log: string[] = []

      const em = db.orm.em()
      const items: Item[] = Array.from({ length: ROWS }, () => em.create('Item', { code: freshCode() }))
      await em.flush()
      /** The rows as last committed, by entity. */
      let committed = new Map<Item, Row>(items.map((item) => [item, { code: item.code, version: item.version }]))

      const status = (item: Item) => stateOf(item)!.status
      const live = () => items.filter((item) => status(item) === 'new' || status(item) === 'managed')
      /** Codes some row held at the last commit that no live row holds now. */
      const freed = () => {
        const held = new Set(live().map((item) => item.code))
        return [...committed.values()].map((row) => row.code).filter((code) => !held.has(code))
      }
      const holderAtCommit = (code: string) => [...committed].find(([, row]) => row.code === code)?.[0]

      /** What the flush must do: refuse, fail on the server, or commit with passes and a lock. */
      const predict = (): { refuse?: Item; cycle?: Item[]; levels: number } => {
        const edges = new Map<Item, Item>()
        for (const item of live()) {
          const holder = holderAtCommit(item.code)
          if (holder === undefined || holder === item || status(holder) === 'removed') continue
          // The holder is live and gives the code up (live codes are distinct).
          if (status(item) === 'new') return { refuse: item, levels: 0 }
          edges.set(item, holder)
        }
        // Each item takes at most one code, so the edges form paths and cycles.
        let levels = 0
        for (const start of edges.keys()) {
          const seen = new Set<Item>([start])
          let at = start
          for (let holder = edges.get(at); holder !== undefined; holder = edges.get(at)) {
            if (seen.has(holder)) return { cycle: [...seen], levels: 0 }
            seen.add(holder)
            at = holder
          }
          levels = Math.max(levels, seen.size - 1)
        }
        return { levels }
      }

      const checkTable = async (what: string) => {
        const rows = await db.sql`select id::text, code, version from passing_item where code like ${`s${seed}-%`} order by passing_item.id`
        const model = [...committed].map(([item, row]) => ({ id: String(item.id), code: row.code, version: row.version }))
        expect(rows, `${what}: ${log.join('; ')}`).toEqual(model.sort((a, b) => Number(a.id) - Number(b.id)))
      }

      const flush = async () => {
        for (let attempt = 0; ; attempt++) {
          expect(attempt, log.join('; ')).toBeLessThan(10)
          const expected = predict()
          const updated = live().filter((item) => status(item) === 'managed' && item.code !== committed.get(item)!.code)
          log.push(`flush (${expected.refuse ? 'refused' : expected.cycle ? `cycle of ${expected.cycle.length}` : `${expected.levels + 1} level(s)`})`)
          let result: FlushResult | undefined
          let error: unknown
          await em.flush().then(
            (r) => (result = r),
            (e: unknown) => (error = e),
          )
          if (expected.refuse) {
            expect(error, log.join('; ')).toBeInstanceOf(EntityStateError)
            await checkTable('after a refused flush')
            log.push(`mend: ${expected.refuse.code} created anew`)
            expected.refuse.code = freshCode()
            continue
          }
          if (expected.cycle) {
            expect(error, log.join('; ')).toBeInstanceOf(UniqueViolationError)
            await checkTable('after a cycle failed')
            const mended = pick(expected.cycle)!
            log.push(`mend: ${mended.code} renamed afresh`)
            mended.code = freshCode()
            continue
          }
          expect(error, log.join('; ')).toBeUndefined()
          const kinds = result!.plan.waves.flatMap((w) => w.ops.map((op) => op.kind))
          expect(kinds.filter((k) => k === 'lock').length, log.join('; ')).toBe(expected.levels > 0 ? 1 : 0)
          expect(kinds.filter((k) => k === 'update').length, log.join('; ')).toBe(updated.length > 0 ? expected.levels + 1 : 0)
          const before = committed
          committed = new Map(items.filter((item) => status(item) === 'managed').map((item) => [item, { code: item.code, version: item.version }]))
          for (const item of updated) expect(committed.get(item)!.version, log.join('; ')).toBe(before.get(item)!.version + 1)
          await checkTable('after a flush')
          return
        }
      }

      for (let step = 0; step < STEPS; step++) {
        const r = next()
        if (r < 0.45) {
          // A few live rows take a shuffle of their own codes, freed ones and fresh ones.
          const chosen = live().filter(() => next() < 0.5).slice(0, 4)
          if (chosen.length === 0) continue
          const codes = [...chosen.map((item) => item.code), ...freed().filter(() => next() < 0.5)]
          for (let i = Math.floor(next() * 3); i > 0; i--) codes.push(freshCode())
          for (let i = codes.length - 1; i > 0; i--) {
            const j = Math.floor(next() * (i + 1))
            ;[codes[i], codes[j]] = [codes[j]!, codes[i]!]
          }
          const renames = chosen.map((item, i) => `${item.code}→${codes[i]}`)
          log.push(`rename ${renames.join(', ')}`)
          chosen.forEach((item, i) => (item.code = codes[i]!))
        } else if (r < 0.6) {
          const code = next() < 0.5 ? pick(freed()) ?? freshCode() : freshCode()
          log.push(`create ${code}`)
          items.push(em.create('Item', { code }))
        } else if (r < 0.75) {
          const item = pick(live())
          if (item === undefined) continue
          log.push(`remove ${item.code}`)
          em.remove(item)
        } else {
          await flush()
        }
      }
      await flush()
    })
  }
})
