import { setFlagsFromString } from 'node:v8'
import type postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { flushwave, PostgresJsExecutor } from '../../src/index.js'
import type { PostgresJsPort } from '../../src/drivers/postgres-js/executor.js'
import { DEFAULT_LEDGER_TABLE, ledger } from '../../src/sql/render-ledger.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'

/**
 * The postgres.js executor keeps its last flush's BEGIN, capture and COMMIT (see
 * drivers/postgres-js/connection.ts, Specimens), so that the hidden classes of postgres.js's query objects outlive a
 * major GC. That covers a flush's statements only while, once answered, they have the capture's
 * hidden class: these tests ask V8 (%HaveSameMap).
 */
setFlagsFromString('--allow-natives-syntax')
const sameHiddenClass = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean

/** `pool`, recording every query made on a connection it reserves. */
function recording(pool: postgres.Sql, made: object[]): postgres.Sql {
  const reserve = async () => {
    const reserved = await pool.reserve()
    return new Proxy(reserved, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver) as unknown
        if (key !== 'unsafe') return value
        return (...args: Parameters<postgres.ReservedSql['unsafe']>) => {
          const query = target.unsafe(...args)
          made.push(query)
          return query
        }
      },
    })
  }
  return new Proxy(pool, { get: (target, key, receiver) => (key === 'reserve' ? reserve : Reflect.get(target, key, receiver)) })
}

describe("the postgres.js executor's kept queries", () => {
  let db: TestDatabase<typeof bookstore.defs>
  beforeAll(async () => {
    db = await testDatabase(bookstore)
  })
  afterAll(async () => {
    await db.close()
  })

  it("are the last flush's BEGIN, capture and COMMIT, and have its statements' hidden class", async () => {
    const made: object[] = []
    const executor = new PostgresJsExecutor(recording(db.sql, made), { ledger: ledger(DEFAULT_LEDGER_TABLE) })
    const orm = flushwave({ schema: bookstore, executor })
    for (const title of ['first', 'second']) {
      made.length = 0
      const em = orm.em()
      const author = em.create('Author', { name: title })
      em.create('Book', { title, author })
      em.create('Book', { title: `${title} again`, author })
      await em.flush()
    }
    // BEGIN, the capture, the author's insert, the books' (two rows: the array form), COMMIT.
    expect(made).toHaveLength(5)
    const kept = (executor.port as PostgresJsPort).specimens.queries
    expect(kept).toEqual([made[0], made[1], made[4]])
    for (const statement of made.slice(2, -1)) expect(sameHiddenClass(statement, kept[1]!)).toBe(true)
    // The check can fail: BEGIN and COMMIT go without parameters, a path of their own.
    expect(sameHiddenClass(kept[0]!, kept[1]!)).toBe(false)
    expect(sameHiddenClass(kept[2]!, kept[1]!)).toBe(false)
  })
})
