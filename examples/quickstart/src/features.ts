// The tour of docs/guide/tour.md, kept here so that `pnpm test` type-checks it and test/features.test.ts runs it.
import postgres from 'postgres'
import { defineSchema, entity, flushwave, OptimisticLockError, raw, t, tcpNoDelay, ValidationError, type Hooks } from 'flushwave'

// ── schema ───────────────────────────────────────────────────────────────────────────────────────
export const shop = defineSchema({
  Customer: entity('customer', {
    id: t.uuidId(), //                                          UUID v7, made by create()
    email: t.text().unique().length({ max: 200 }).check((v) => (v.includes('@') ? undefined : 'must contain @')),
    credit: t.integer().range({ min: 0 }),
    version: t.version(), //                                    optimistic lock
    orders: t.oneToMany('Order', 'customer'),
  }),
  Order: entity('order', {
    id: t.id(), //                                              int8 identity, ids pooled in blocks
    customer: t.manyToOne('Customer').onDelete('cascade'), //   removing a customer removes its orders
    coupon: t.manyToOne('Coupon').nullable().onDelete('set null'),
    lines: t.oneToMany('OrderLine', 'order'),
  }),
  OrderLine: entity('order_line', {
    id: t.id(),
    order: t.manyToOne('Order').onDelete('cascade'),
    sku: t.text(),
    quantity: t.integer().range({ min: 1, max: 100 }),
  }),
  Coupon: entity('coupon', { id: t.providedId(), code: t.text() }), // ids the application chooses
})

const hooks: Hooks<typeof shop.defs> = {
  entities: {
    Customer: {
      beforeCreate: (customer) => void (customer.email = customer.email.toLowerCase()),
      validate: (customer) => (customer.credit > 10_000 ? 'credit above 10,000 needs approval' : undefined),
    },
    Order: {
      // Runs before anything is sent; may read, and what it creates joins the same flush.
      async beforeCreate(order, em) {
        const [welcome] = await em.find('Coupon', { code: 'WELCOME' })
        if (welcome) order.coupon = welcome
      },
    },
  },
  afterCommit: (result) => console.log(`flushed ${result.statements} statements in ${result.roundTrips} round trip(s)`),
}

export async function features(url: string): Promise<void> {
  const sql = postgres(url, { ...tcpNoDelay, max: 10 })
  const orm = flushwave({ schema: shop, sql, hooks })

  // ── one unit of work ───────────────────────────────────────────────────────────────────────────
  const em = orm.em()
  const ann = em.create('Customer', { email: 'Ann@Example.com', credit: 100 })
  const order = em.create('Order', { customer: ann })
  em.create('OrderLine', { order, sku: 'tea', quantity: 2 })
  await em.flush() // BEGIN; 3 inserts; COMMIT: one pipeline

  // ── optimistic locking: a concurrent change makes this flush fail whole, no extra round trip ──
  ann.credit -= 40
  try {
    await em.flush()
  } catch (error) {
    if (error instanceof OptimisticLockError) console.log('stale:', error.ids) // reload and retry
  }

  // ── validation: every failure at once, nothing sent ────────────────────────────────────────────
  const cake = em.create('OrderLine', { order, sku: 'cake', quantity: 500 })
  await em.flush().catch((error: unknown) => {
    if (error instanceof ValidationError) console.log(error.failures) // [{ entity, property: 'quantity', message }]
  })
  cake.quantity = 50
  await em.flush() // fixed: the same EntityManager flushes it

  // ── cascades: customer → orders → lines, deleted with set-based statements in the same pipeline
  em.remove(ann)
  await em.flush()

  // ── a transaction around reads and several flushes ─────────────────────────────────────────────
  await orm.em().transaction(async (tx) => {
    const bob = tx.create('Customer', { email: 'bob@example.com', credit: 0 })
    await tx.flush() // pipelined inside the transaction, no BEGIN/COMMIT of its own
    const [found] = await tx.find('Customer', { email: 'bob@example.com' })
    tx.create('Order', { customer: found ?? bob })
    await tx.flush()
  }) // commits here; if the callback throws, everything rolls back and the entities are as before

  // ── atomic counters: added on the server, checking no version, so concurrent ones never conflict
  const shopper = orm.em()
  const [bob] = await shopper.find('Customer', { email: 'bob@example.com' })
  if (bob) {
    shopper.increment(bob, 'credit', 25) // `credit = credit + 25` inside the row's one UPDATE
    await shopper.flush()
    console.log('credit now', bob.credit) // read back from the row the UPDATE wrote
  }

  // ── a retry policy: a unit of work that lost a race runs again on a fresh EntityManager ────────
  const { attempts } = await orm.unitOfWork(
    async (em) => {
      const [bob] = await em.find('Customer', { email: 'bob@example.com' })
      if (bob) bob.credit += 5 // reloaded by each attempt, so it adds to what the winner committed
    },
    { attempts: 5 }, // after stale versions, deadlocks, serialization failures, lost connections
  )
  console.log('committed after', attempts, 'attempt(s)')

  // ── the reads of a list endpoint: conditions across relations, a count and a page in one round trip
  const reader = orm.em()
  const ordering = { orders: { some: { coupon: null } }, or: [{ email: { ilike: '%@example.com' } }, { credit: { gt: 100 } }] }
  const [total, page] = await Promise.all([
    reader.count('Customer', ordering),
    reader.findPage('Customer', ordering, { orderBy: { email: 'asc' }, first: 20 }), // page.endCursor → `after`
  ])
  await reader.populate(page.items, 'orders.lines') // one query per level, however many customers
  console.log('customers:', total, 'on this page:', page.items.length, 'more:', page.hasNextPage)
  const credit = await reader.aggregate('Customer', {}, { sum: ['credit'], max: ['email'] })
  console.log('credit in all:', credit.sum.credit, 'of', credit.count, 'customer(s)')
  const rich = await reader.findBySql('Customer', raw`select * from customer where credit >= ${10}`) // values bound
  for await (const customer of reader.stream('Customer', {}, { batchSize: 500 })) void customer // any number, 500 at a time
  console.log('rich:', rich.map((c) => c.email))

  await sql.end()
}
