import { PrismaPg } from '@prisma/adapter-pg'
// @ts-ignore -- written by scripts/prisma-generate.sh and gitignored; until it runs, its types are `any` so that tsc still passes.
import type * as Generated from '../generated/prisma/client.js'
import { listResult, type Series, type SeriesFactory } from './types.js'

/**
 * Prisma 7 as its docs show: the generated `prisma-client` (prisma/schema.prisma, models mapped
 * onto the harness's tables; never migrated from here) on the `pg` driver adapter, with no native
 * engine. Every unit of work is one interactive transaction, `prisma.$transaction(async (tx) => …)`:
 * nested writes create the author graph, `updateMany`/`update` change rows, `deleteMany` removes
 * children first. Prisma sends the statements one after another on the transaction's connection.
 */

const GENERATED = '../generated/prisma/client.js'
const generated: typeof Generated = await import(GENERATED).catch((error: unknown) => {
  throw new Error(`prisma series: the Prisma client is not generated yet: run packages/bench/scripts/prisma-generate.sh (${(error as Error).message})`)
})

type Client = Generated.PrismaClient
type Tx = Generated.Prisma.TransactionClient
/** The t01…t20 delegates share one shape; typed as t01's (see `mixed`). */
type MixedDelegate = Tx['t01']
/** What the units of work read from loaded rows, so that they stay typed even before generation. */
interface Row {
  readonly id: bigint
}
interface ListedBook extends Row {
  readonly reviews: readonly Row[]
  readonly author: Row & { readonly lastName: string; readonly books: readonly Row[] }
}
interface LoadedAuthor extends Row {
  readonly books: readonly (Row & { readonly reviews: readonly Row[]; readonly bookTags: readonly unknown[] })[]
}

export const series: SeriesFactory = {
  name: 'prisma',
  pooler: true,
  async open(url, options = {}) {
    const prisma: Client = new generated.PrismaClient({
      adapter: new PrismaPg({ connectionString: url, max: options.poolSize ?? 1 }),
      // The default interactive-transaction timeout (5 s) is shorter than bulkCreate×10 takes over
      // the latency proxy (one round trip per nested row); a Prisma user raises it the same way.
      transactionOptions: { maxWait: 60_000, timeout: 600_000 },
    })
    await prisma.$connect()
    // The driver adapter connects lazily: connect now, not in the first timed unit of work.
    await prisma.$queryRawUnsafe('select 1')
    return prismaUnitsOfWork(prisma)
  },
}

const ids = (values: readonly number[]): bigint[] => values.map((v) => BigInt(v))

/** The model delegate of a t01…t20 table (`tx.t07`). Each model has its own delegate type, all of the same shape: cast to t01's. */
function mixed(tx: Tx, table: string): MixedDelegate {
  const delegate = (tx as unknown as Record<string, MixedDelegate | undefined>)[table]
  if (!delegate) throw new Error(`prisma series: no model for table ${table}`)
  return delegate
}

function prismaUnitsOfWork(prisma: Client): Series {
  return {
    async bulkCreate(g) {
      return async () => {
        await prisma.$transaction(async (tx: Tx) => {
          // Prisma's way to create a graph: one nested write per author (books → reviews, and the
          // book_tag link rows each creating their tag).
          for (const [a, x] of g.authors.entries()) {
            const books = g.books.flatMap((b, bi) => (b.author === a ? [bi] : []))
            await tx.author.create({
              data: {
                ...x,
                books: {
                  create: books.map((bi) => ({
                    title: g.books[bi]!.title,
                    pages: g.books[bi]!.pages,
                    reviews: { create: g.reviews.filter((r) => r.book === bi).map((r) => ({ rating: r.rating, text: r.text })) },
                    bookTags: { create: g.bookTags.filter((l) => l.book === bi).map((l) => ({ tag: { create: { name: g.tags[l.tag]!.name } } })) },
                  })),
                },
              },
              select: { id: true },
            })
          }
        })
      }
    },
    async bulkUpdate(seed) {
      const [authors, books, reviews, tags, rows]: [Row[], Row[], Row[], Row[], Row[]] = await Promise.all([
        prisma.author.findMany({ where: { id: { in: ids(seed.authorIds) } } }),
        prisma.book.findMany({ where: { id: { in: ids(seed.bookIds) } } }),
        prisma.bookReview.findMany({ where: { id: { in: ids(seed.reviewIds) } } }),
        prisma.tag.findMany({ where: { id: { in: ids(seed.tagIds) } } }),
        prisma.t01.findMany({ where: { id: { in: ids(seed.t01Ids) } } }),
      ])
      const tagById = new Map(tags.map((x) => [x.id, x]))
      const namedTags = seed.tagIds.map((i) => {
        const x = tagById.get(BigInt(i))
        if (!x) throw new Error(`prisma series: tag ${i} was not loaded`)
        return x
      })
      return async () => {
        await prisma.$transaction(async (tx: Tx) => {
          // Same value on every loaded row: one updateMany per table. Tag names differ per row:
          // one update each (Prisma has no multi-row update of different values).
          await tx.author.updateMany({ where: { id: { in: authors.map((a) => a.id) } }, data: { firstName: seed.firstName } })
          await tx.book.updateMany({ where: { id: { in: books.map((b) => b.id) } }, data: { title: seed.title, pages: seed.pages } })
          await tx.bookReview.updateMany({ where: { id: { in: reviews.map((r) => r.id) } }, data: { rating: seed.rating } })
          for (const [i, x] of namedTags.entries()) await tx.tag.update({ where: { id: x.id }, data: { name: `${seed.tagPrefix}${i}` }, select: { id: true } })
          await tx.t01.updateMany({ where: { id: { in: rows.map((r) => r.id) } }, data: { value: seed.value } })
        })
      }
    },
    async mixedFlush(seed) {
      const loaded = await Promise.all(
        seed.tables.map(async (table, i) => {
          const rows: Row[] = await mixed(prisma, table).findMany({ where: { id: { in: ids([seed.updateIds[i]!, seed.deleteIds[i]!]) } } })
          const updated = rows.find((r) => r.id === BigInt(seed.updateIds[i]!))
          const deleted = rows.find((r) => r.id === BigInt(seed.deleteIds[i]!))
          if (!updated || !deleted) throw new Error(`prisma series: ${table} rows were not loaded`)
          return { table, updated, deleted }
        }),
      )
      return async () => {
        await prisma.$transaction(async (tx: Tx) => {
          for (const { table, updated, deleted } of loaded) {
            const t = mixed(tx, table)
            await t.create({ data: { name: seed.insertName, value: 1 }, select: { id: true } })
            await t.update({ where: { id: updated.id }, data: { value: seed.updateValue }, select: { id: true } })
            await t.delete({ where: { id: deleted.id }, select: { id: true } })
          }
        })
      }
    },
    async deleteGraph(seed) {
      const author: LoadedAuthor = await prisma.author.findUniqueOrThrow({
        where: { id: BigInt(seed.authorId) },
        include: { books: { include: { reviews: true, bookTags: true } } },
      })
      const bookIds = author.books.map((b) => b.id)
      const reviewIds = author.books.flatMap((b) => b.reviews.map((r) => r.id))
      if (!author.books.some((b) => b.bookTags.length > 0)) throw new Error('prisma series: the author has no book_tag links')
      return async () => {
        await prisma.$transaction(async (tx: Tx) => {
          // No ON DELETE CASCADE: children first.
          await tx.bookTag.deleteMany({ where: { bookId: { in: bookIds } } })
          await tx.bookReview.deleteMany({ where: { id: { in: reviewIds } } })
          await tx.book.deleteMany({ where: { id: { in: bookIds } } })
          await tx.author.delete({ where: { id: author.id }, select: { id: true } })
        })
      }
    },
    async cpuFlush(seed) {
      const rows: Row[] = await mixed(prisma, seed.table).findMany({ where: { id: { in: ids(seed.ids) } } })
      return async () => {
        // value = value + 1 on every loaded row: one updateMany with an atomic increment.
        await prisma.$transaction(async (tx: Tx) => {
          await mixed(tx, seed.table).updateMany({ where: { id: { in: rows.map((r) => r.id) } }, data: { value: { increment: 1 } } })
        })
      }
    },
    async noopFlush(seed) {
      await mixed(prisma, seed.table).findMany({ where: { id: { in: ids(seed.ids) } } })
      return async () => {
        // Nothing changed: the same interactive transaction with no statements.
        await prisma.$transaction(async () => {})
      }
    },
    async scale(names) {
      return async () => {
        // createMany: Prisma splits it into statements under PostgreSQL's bind parameter limit.
        await prisma.$transaction(async (tx: Tx) => {
          await tx.scaleItem.createMany({ data: names.map((name) => ({ name })) })
        })
      }
    },
    async listEndpoint(seed) {
      return async () => {
        // `startsWith` with `mode: 'insensitive'` is Prisma's ILIKE 'prefix%'; relation filters
        // (`author: {…}`, `reviews: { some: … }`) and `include` for the levels, `take` for the page;
        // the count tells whether there is a next page.
        const where = {
          author: { lastName: { startsWith: seed.lastNamePrefix, mode: 'insensitive' as const } },
          reviews: { some: { rating: { gte: seed.minRating } } },
        }
        const [books, count]: [ListedBook[], number] = await Promise.all([
          prisma.book.findMany({
            where,
            orderBy: [{ title: 'asc' }, { id: 'asc' }],
            take: seed.first,
            include: { reviews: true, author: { include: { books: true } } },
          }),
          prisma.book.count({ where }),
        ])
        return listResult(
          count,
          count > seed.first,
          books.map((b) => ({ id: b.id, reviews: b.reviews.length, author: { id: b.author.id, lastName: b.author.lastName, books: b.author.books.length } })),
        )
      }
    },
    close: () => prisma.$disconnect(),
  }
}
