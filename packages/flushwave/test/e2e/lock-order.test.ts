import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { defineSchema, entity, t, type EntityManager } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { EXECUTORS } from '../support/executors.js'

/**
 * A flush that writes several rows of one table locks them in id order, whatever order the server
 * finds them in. On a small table the server scans the heap (a hash join or a sequential scan), and
 * heap order is the order of the rows' latest versions, not of their ids; two flushes that lock
 * shared rows in two different orders deadlock, and each deadlock costs `deadlock_timeout` (1 s by
 * default) before PostgreSQL aborts one of them. The bookstore example's checkouts hit exactly this
 * on its 12-row stock table.
 */
const schema = defineSchema({
  Slot: entity('slot', { id: t.id(), n: t.integer(), hits: t.integer().default(0) }),
  Guarded: entity('guarded', { id: t.id(), n: t.integer(), version: t.version() }),
  // Rows a cascade finds by their reference (the client does not know them): parts go with their
  // holder, loose ones let go of it, and nodes go with the tree above them.
  Holder: entity('holder', { id: t.id() }),
  Part: entity('part', { id: t.id(), n: t.integer(), holder: t.manyToOne('Holder').onDelete('cascade') }),
  Loose: entity('loose', { id: t.id(), n: t.integer(), holder: t.manyToOne('Holder').nullable().onDelete('set null') }),
  Node: entity('node', { id: t.id(), n: t.integer(), parent: t.manyToOne('Node').nullable().onDelete('cascade') }),
  // Links of a removed row, or links removed one by one: join-table rows, locked in key order.
  Box: entity('box', { id: t.id(), items: t.manyToMany('Item', { table: 'box_item' }) }),
  Item: entity('item', { id: t.id() }),
  // A cycle of references, broken at Left.right: removed rows let go of it first (an update).
  Left: entity('left_end', { id: t.id(), n: t.integer(), right: t.manyToOne('Right').nullable() }),
  Right: entity('right_end', { id: t.id(), left: t.manyToOne('Left').nullable() }),
  // Rows that pass a unique value on: each link of the chain is an UPDATE of its own, in chain order.
  Coded: entity('coded', { id: t.id(), n: t.integer(), code: t.text().unique() }),
})
type Table = 'slot' | 'guarded' | 'part' | 'loose' | 'node' | 'left_end' | 'coded'
type D = typeof schema.defs

describe.each(EXECUTORS)('lock order of multi-row writes through %s', (executor) => {
  let db: TestDatabase<D>
  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'lockorder', max: 3, executor })
  })
  afterAll(() => db.close())

  // Rows written in descending id order, so the heap holds them in the reverse of id order: enough
  // of them that the server hashes one side of the join and scans the table rather than looking
  // each id up in its index (which would follow our order).
  const ROWS = 40
  const ids = Array.from({ length: ROWS }, (_, i) => ROWS - i)
  beforeEach(async () => {
    await db.sql`truncate slot, guarded, part, loose, node, holder, box_item, box, item, left_end, right_end, coded`
    for (const table of ['slot', 'guarded']) {
      await db.sql.unsafe(`insert into ${table} (id, n) overriding system value select i, 0 from unnest($1::int8[]) as i`, [ids])
    }
    await db.sql`insert into holder (id) overriding system value values (1)`
    await db.sql`insert into node (id, n) overriding system value values (100, 0)`
    for (const [table, column, parent] of [['part', 'holder_id', 1], ['loose', 'holder_id', 1], ['node', 'parent_id', 100]] as const) {
      await db.sql.unsafe(`insert into ${table} (id, n, ${column}) overriding system value select i, 0, ${parent} from unnest($1::int8[]) as i`, [ids])
    }
    await db.sql`insert into box (id) overriding system value values (1)`
    await db.sql.unsafe(`insert into item (id) overriding system value select i from unnest($1::int8[]) as i`, [ids])
    await db.sql.unsafe(`insert into box_item (box_id, item_id) select 1, i from unnest($1::int8[]) as i`, [ids])
    await db.sql`insert into right_end (id) overriding system value values (1)`
    await db.sql.unsafe(`insert into left_end (id, n, right_id) overriding system value select i, 0, 1 from unnest($1::int8[]) as i`, [ids])
    await db.sql.unsafe(`insert into coded (id, n, code) overriding system value select i, 0, 'c' || i from unnest($1::int8[]) as i`, [ids])
  })

  /**
   * Another transaction takes row 1, the flush starts and must wait for it, then the other
   * transaction takes row 2. A flush that locks in id order holds nothing while it waits for row 1,
   * so the other transaction gets row 2 at once and commits; one that locked the rows in heap order
   * holds row 2 already and deadlocks with it.
   */
  async function againstReverseLocker(table: Table | typeof link, change: (em: EntityManager<D>) => Promise<void>) {
    const lock = (k: number) => (table === link ? `select from box_item where box_id = 1 and item_id = ${k} for update` : `update ${table} set n = n + 100 where id = ${k}`)
    const other = await db.sql.reserve()
    try {
      await other`set lock_timeout = '5s'`
      await other`begin`
      await other.unsafe(lock(1))
      const em = db.orm.em()
      const flushed = change(em).then(
        () => 'committed',
        (error: unknown) => error,
      )
      await waitForLockWait()
      const second = await other.unsafe(lock(2)).then(
        () => 'locked',
        (error: { code?: string }) => `failed: ${error.code ?? String(error)}`,
      )
      await other`commit`
      expect({ second, flush: await flushed }).toEqual({ second: 'locked', flush: 'committed' })
    } finally {
      await other`rollback`.catch(() => {})
      other.release()
    }
  }

  /** The join table box_item, whose rows the other transaction locks by key (box 1, item k). */
  const link = 'box_item'

  /** Until some session waits on a row lock (the flush, behind the other transaction). */
  async function waitForLockWait() {
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline) {
      const [row] = await db.sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`
      if (row!.n > 0) return
      await new Promise((r) => setTimeout(r, 10))
    }
    throw new Error('the flush never waited for the row the other transaction holds')
  }

  const loadAll = <N extends 'Slot' | 'Guarded'>(em: EntityManager<D>, name: N) => em.find(name, {})
  const rows = (n: number, extra: object = {}) => ids.map((id) => ({ id, n, ...extra })).sort((a, b) => a.id - b.id)

  it('an update of several rows', async () => {
    await againstReverseLocker('slot', async (em) => {
      for (const s of await loadAll(em, 'Slot')) s.n = 7
      await em.flush()
    })
    expect(await db.sql`select id::int, n from slot order by id`).toEqual(rows(7))
  })

  it('an update with increments', async () => {
    await againstReverseLocker('slot', async (em) => {
      for (const s of await loadAll(em, 'Slot')) em.increment(s, 'hits', 1)
      await em.flush()
    })
    expect(await db.sql`select id::int, n, hits from slot order by id`).toEqual(rows(0, { hits: 1 }).map((r) => (r.id <= 2 ? { ...r, n: 100 } : r)))
  })

  it('a versioned update', async () => {
    // The other transaction changes n without the version: the flush's version check still holds.
    await againstReverseLocker('guarded', async (em) => {
      for (const g of await loadAll(em, 'Guarded')) g.n = 7
      await em.flush()
    })
    expect(await db.sql`select id::int, n, version from guarded order by id`).toEqual(rows(7, { version: 2 }))
  })

  it('updates that pass unique values on along a chain, one UPDATE per link', async () => {
    // Row k takes row k + 1's code and the last row a fresh one: the chain is written from the last
    // row down to row 1, one UPDATE each, so row 2 is written before the flush reaches row 1.
    await againstReverseLocker('coded', async (em) => {
      const coded = (await em.find('Coded', {})).sort((a, b) => Number(a.id) - Number(b.id))
      coded.forEach((row, i) => (row.code = coded[i + 1]?.code ?? 'fresh'))
      const result = await em.flush()
      expect(result.updated).toEqual({ coded: ROWS })
    })
    const codes = await db.sql`select id::int, code from coded order by id`
    expect(codes).toEqual(ids.map((id) => ({ id, code: id === ROWS ? 'fresh' : `c${id + 1}` })).sort((a, b) => a.id - b.id))
  })

  /** Writes that empty a table (every row gone): which table the other transaction locks, and the change. */
  const emptying: [name: string, locked: Table | typeof link, change: (em: EntityManager<D>) => Promise<void>][] = [
    ['a delete of several rows', 'slot', async (em) => (await loadAll(em, 'Slot')).forEach((s) => em.remove(s))],
    ['a versioned delete of several rows', 'guarded', async (em) => (await loadAll(em, 'Guarded')).forEach((g) => em.remove(g))],
    ['a cascade that deletes the rows referring to a removed one', 'part', async (em) => em.remove(await em.load('Holder', 1))],
    ['a tree deleted below a removed node', 'node', async (em) => em.remove(await em.load('Node', 100))],
    [
      'links removed one by one',
      link,
      async (em) => {
        const box = await em.load('Box', 1)
        for (const item of await em.find('Item', {})) box.items.remove(item)
      },
    ],
    ['the links of a removed row', link, async (em) => em.remove(await em.load('Box', 1))],
    ['removed rows letting go of a reference that closes a cycle', 'left_end', async (em) => (await em.find('Left', {})).forEach((l) => em.remove(l))],
  ]
  it.each(emptying)('%s', async (_, locked, change) => {
    await againstReverseLocker(locked, async (em) => {
      await change(em)
      await em.flush()
    })
    expect(await db.sql.unsafe(`select count(*)::int as n from ${locked}`)).toEqual([{ n: 0 }])
  })

  it('a cascade that sets references to a removed row to null', async () => {
    await againstReverseLocker('loose', async (em) => {
      em.remove(await em.load('Holder', 1))
      await em.flush()
    })
    expect(await db.sql`select count(*)::int as n from loose where holder_id is null`).toEqual([{ n: ROWS }])
  })
})
