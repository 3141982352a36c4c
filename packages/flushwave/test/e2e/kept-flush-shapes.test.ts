import { setFlagsFromString } from 'node:v8'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { flushwave, type FlushResult } from '../../src/index.js'
import { KEEP_PARAM_CHARS, keptShapes } from '../../src/flush/kept-shapes.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

/**
 * A committed flush whose SQL is small keeps its change rows, statements, result and clock until
 * the next one (kept-shapes.ts), so that their hidden classes outlive a major GC. That helps the
 * next flush only while its objects have the same hidden classes: these tests ask V8 (%HaveSameMap).
 */
setFlagsFromString('--allow-natives-syntax')
const sameHiddenClass = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean

describe("a flush's kept objects", () => {
  let db: TestDatabase<typeof bookstore.defs>
  beforeAll(async () => {
    db = await testDatabase(bookstore)
  })
  afterAll(async () => {
    await db.close()
  })

  it("are the last small flush's, with the hidden classes of the next one's", async () => {
    const orm = flushwave({ schema: bookstore, sql: db.sql })
    const results: FlushResult[] = []
    for (const name of ['first', 'second']) {
      const em = orm.em()
      const author = em.create('Author', { name })
      em.create('Book', { title: name, author })
      results.push(await em.flush())
    }
    const [changes, waves, result, clock] = keptShapes()
    expect(result).toBe(results[1])
    expect(sameHiddenClass(results[0]!, result!)).toBe(true)
    expect(sameHiddenClass(results[0]!.phases, results[1]!.phases)).toBe(true)
    expect(sameHiddenClass(results[0]!.plan, results[1]!.plan)).toBe(true)
    expect(changes).toHaveProperty('inserts')
    expect(waves).toBeInstanceOf(Array)
    expect(clock).toHaveProperty('phases', results[1]!.phases)
    // The check can fail: the result and its phases are records of their own.
    expect(sameHiddenClass(result!, results[1]!.phases)).toBe(false)
  })

  it('are not replaced by a flush whose parameters pass the bound: its rows are not held', async () => {
    const orm = flushwave({ schema: bookstore, sql: db.sql })
    const small = orm.em()
    small.create('Tag', { name: 'small' })
    const kept = await small.flush()
    expect(keptShapes()[2]).toBe(kept)
    const large = orm.em()
    const name = 'x'.repeat(100)
    for (let i = 0; i < Math.ceil(KEEP_PARAM_CHARS / name.length) + 1; i++) large.create('Tag', { name: `${name}${i}` })
    const big = await large.flush()
    expect(big.inserted.tag).toBeGreaterThan(KEEP_PARAM_CHARS / name.length)
    expect(keptShapes()[2]).toBe(kept)
  })

  it('are not replaced by a flush that sent a COPY: its rows are no parameters, and they are not held either', async () => {
    const orm = flushwave({ schema: bookstore, sql: db.sql, copyRows: 3 })
    const small = orm.em()
    small.create('Tag', { name: 'kept before a copy' })
    const kept = await small.flush()
    expect(keptShapes()[2]).toBe(kept)
    const copying = orm.em()
    for (let i = 0; i < 3; i++) copying.create('Tag', { name: `copied ${i}` })
    expect((await copying.flush()).copied).toEqual({ tag: 3 })
    expect(keptShapes()[2]).toBe(kept)
  })
})
