/**
 * Model-based property test. fast-check generates random sequences of unit-of-work operations over
 * the bookstore schema (create, update, relink, link/unlink tags, remove, in-place changes, loads,
 * bad values, new EntityManagers, flushes and deliberately failing flushes); each sequence runs
 * against PostgreSQL and against a plain in-memory model of the five tables. After every flush the
 * tables, read with raw SQL, must equal the model: all of them after a successful flush, and the
 * model as of the last successful flush after a failed one (which must throw the typed error the
 * model predicts). A failed flush is then fixed (offender renamed, removed or relinked) and the same
 * EntityManager must write everything else that was pending.
 *
 * Seeded and bounded for CI. Environment variables:
 *   MODEL_RUNS=200    sequences to run (default 40)
 *   MODEL_LENGTH=40   operations per sequence at most (default 25)
 *   MODEL_SEED=1234   seed (default fixed, so every run checks the same sequences)
 *   MODEL_PATH=…      with MODEL_SEED, replays the counterexample fast-check reported
 *   MODEL_STATS=1     also prints how often each operation and each kind of failed flush ran
 * e.g. `MODEL_RUNS=200 npx vitest run packages/flushwave/test/e2e/model.test.ts`.
 *
 * The bookstore's many-to-ones have no onDelete, so the database takes NO ACTION: removing an author
 * that still has books (or a book that still has reviews) fails the whole flush, which the model
 * predicts. Unique values (author email, tag name) are fresh, or reuse a value no row holds any
 * more, except in the failing-flush operation, which duplicates one on purpose.
 */
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  EntityStateError,
  FlushError,
  ForeignKeyViolationError,
  InvalidValueError,
  UniqueViolationError,
  type Collection,
  type EntityManager,
  type FlushResult,
} from '../../src/index.js'
import { bookstore } from '../support/bookstore.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

const RUNS = Number(process.env.MODEL_RUNS ?? 40)
const LENGTH = Number(process.env.MODEL_LENGTH ?? 25)
const SEED = Number(process.env.MODEL_SEED ?? 20_260_522)
const PATH = process.env.MODEL_PATH

type Defs = typeof bookstore.defs
type Em = EntityManager<Defs>
type Kind = 'Author' | 'Book' | 'Review' | 'Tag'
/** A model row's name: kind letter and a number in creation order (A1, B2, …), stable across EntityManagers. */
type Handle = string
/** An entity object seen through its properties (the runner works on all four kinds alike). */
type Loose = Record<string, unknown>
type Values = Record<string, unknown>
type Meta = { isbn?: string; tags?: string[] }
type Acq = 'load' | 'find' | 'ref'

let db: TestDatabase<Defs>

// ── the schema, as the model sees it ──────────────────────────────────────────────────────────────

const KINDS: readonly Kind[] = ['Author', 'Book', 'Review', 'Tag']
const PREFIX: Record<Kind, string> = { Author: 'A', Book: 'B', Review: 'R', Tag: 'T' }
const TABLE: Record<Kind, string> = { Author: 'author', Book: 'book', Review: 'review', Tag: 'tag' }
const FIELDS: Record<Kind, readonly string[]> = {
  Author: ['name', 'email', 'rating', 'createdAt'],
  Book: ['title', 'pages', 'status', 'meta', 'author'],
  Review: ['stars', 'body', 'book'],
  Tag: ['name'],
}
/** The many-to-one of a kind, its target and the target's one-to-many. No onDelete: NO ACTION. */
const REF: Record<Kind, { field: string; target: Kind; inverse: string } | undefined> = {
  Author: undefined,
  Book: { field: 'author', target: 'Author', inverse: 'books' },
  Review: { field: 'book', target: 'Book', inverse: 'reviews' },
  Tag: undefined,
}
const UNIQUE = { Author: 'email', Tag: 'name' } as const
type UniqueKind = keyof typeof UNIQUE

const kindOf = (h: Handle): Kind => KINDS.find((k) => PREFIX[k] === h[0])!
const seqOf = (h: string): number => Number(h.slice(1)) || 0
const byHandle = (a: { h: string }, b: { h: string }) => seqOf(a.h) - seqOf(b.h) || a.h.localeCompare(b.h)

/** PostgreSQL numeric text and the strings we write compare by value: `1e2` = `100`, `1.50` = `1.5`. */
function decimal(s: string): string {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(s)
  if (!m) return `not a decimal: ${s}`
  const [, sign, int = '', frac = '', exp = '0'] = m
  let digits = int + frac
  let point = int.length + Number(exp)
  if (point < 0) {
    digits = '0'.repeat(-point) + digits
    point = 0
  }
  if (point > digits.length) digits += '0'.repeat(point - digits.length)
  const whole = digits.slice(0, point).replace(/^0+/, '') || '0'
  const fraction = digits.slice(point).replace(/0+$/, '')
  const negative = sign === '-' && (whole !== '0' || fraction !== '')
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`
}

/** A model value as compared: numeric by value, timestamps as ISO text (the model keeps them so). */
function norm(field: string, value: unknown): unknown {
  if (value === null || value === undefined) return value
  if (field === 'rating') return decimal(String(value))
  if (value instanceof Date) return value.toISOString()
  return value
}

// ── the reference model ──────────────────────────────────────────────────────────────────────────

interface Row {
  readonly kind: Kind
  /** Column values by property; many-to-ones hold the parent's handle, timestamps ISO text. */
  readonly v: Values
}

/** The five tables: rows by handle and the book↔tag links as `B1>T2`. */
class World {
  readonly rows = new Map<Handle, Row>()
  readonly links = new Set<string>()

  clone(): World {
    const w = new World()
    for (const [h, row] of this.rows) w.rows.set(h, { kind: row.kind, v: structuredClone(row.v) })
    for (const link of this.links) w.links.add(link)
    return w
  }

  live(kind: Kind): Handle[] {
    return [...this.rows].filter(([, row]) => row.kind === kind).map(([h]) => h)
  }

  remove(h: Handle): void {
    this.rows.delete(h)
    for (const link of [...this.links]) if (link.split('>').includes(h)) this.links.delete(link)
  }
}

class Model {
  /** The database as of the last successful flush. */
  committed = new World()
  /** What the database must hold once the current EntityManager's pending changes are flushed. */
  pending = new World()
  readonly ids = new Map<Handle, number>()
  readonly byId = new Map<string, Handle>()
  /** Every unique value ever given out, per unique column. */
  readonly used: Record<UniqueKind, Set<string>> = { Author: new Set(), Tag: new Set() }
  private handles = 0
  private values = 0

  handle(kind: Kind): Handle {
    return `${PREFIX[kind]}${++this.handles}`
  }

  fresh(kind: UniqueKind, base: string): string {
    const value = kind === 'Author' ? `${base}@${++this.values}` : `${base}#${++this.values}`
    this.used[kind].add(value)
    return value
  }

  /** Values of committed rows removed since, that no pending row holds: a flush writing one replaces by key. */
  replaceable(kind: UniqueKind): string[] {
    const held = new Set([...this.pending.rows.values()].filter((row) => row.kind === kind).map((row) => row.v[UNIQUE[kind]]))
    const out: string[] = []
    for (const [h, row] of this.committed.rows) {
      const value = row.v[UNIQUE[kind]]
      if (row.kind === kind && !this.pending.rows.has(h) && typeof value === 'string' && !held.has(value)) out.push(value)
    }
    return out
  }

  /** Values given out before that no row holds, committed or pending: reusable in any statement order. */
  freed(kind: UniqueKind): string[] {
    const held = new Set<unknown>()
    for (const world of [this.committed, this.pending]) {
      for (const row of world.rows.values()) if (row.kind === kind) held.add(row.v[UNIQUE[kind]])
    }
    return [...this.used[kind]].filter((v) => !held.has(v))
  }
}

// ── the runner's view of one EntityManager ───────────────────────────────────────────────────────

interface Segment {
  readonly em: Em
  readonly n: number
  /** The entity object of each handle this EntityManager has (created, loaded or referenced). */
  readonly objs: Map<Handle, Loose>
  readonly handles: Map<object, Handle>
  /** Entities whose many-to-one was assigned since the last successful flush. */
  readonly touched: Set<Handle>
  /** Entities removed in this EntityManager (for create() with a removed tag). */
  readonly removed: Loose[]
  /** Rows removed while this EntityManager knew no unique value of theirs: a flush cannot see the key they free. */
  readonly removedUnread: Set<Handle>
  /** Rows whose unique value this EntityManager has as the row's: read, or written by a flush that committed. */
  readonly keyKnown: Set<Handle>
  /** Rows whose unique value was set here since the last successful flush (created, or assigned). */
  readonly keyPending: Set<Handle>
  /** `B3.pages`: a managed row's property with an increment pending (its entity shows the old value until a flush). */
  readonly incremented: Set<string>
  /** Each entity's id when the runner first held it (a new one's from the id pool at create, or none): ids never change. */
  readonly firstIds: Map<Handle, unknown>
  /** Tags upserted since the last successful flush: no row of a flush may refer to them yet. */
  readonly upserted: Set<Handle>
}

interface Ctx {
  readonly model: Model
  seg: Segment
  ems: number
  readonly trace: string[]
}

const counters = { sequences: 0, operations: 0, flushes: 0, failing: 0 }
/** Per operation and per failure: how often each ran (printed with MODEL_STATS=1). */
const stats = new Map<string, number>()
const tally = (key: string) => stats.set(key, (stats.get(key) ?? 0) + 1)

function newSegment(c: { ems: number }): Segment {
  const n = ++c.ems
  return { em: db.orm.em(), n, objs: new Map(), handles: new Map(), touched: new Set(), removed: [], removedUnread: new Set(), keyKnown: new Set(), keyPending: new Set(), incremented: new Set(), firstIds: new Map(), upserted: new Set() }
}

function log(c: Ctx, line: string): void {
  c.trace.push(`em#${c.seg.n} ${line}`)
}

function show(v: unknown): string {
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString()
  if (v === undefined) return 'undefined'
  try {
    return JSON.stringify(v, (_, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)) ?? String(v)
  } catch {
    return String(v)
  }
}

function remember(c: Ctx, h: Handle, obj: Loose): void {
  if (!c.seg.firstIds.has(h)) c.seg.firstIds.set(h, c.seg.em.idOf(obj as never))
  c.seg.objs.set(h, obj)
  c.seg.handles.set(obj, h)
}

/** The handle of an entity object of this EntityManager: known to the runner, or found by id. */
function handleOf(c: Ctx, obj: unknown): Handle {
  const known = c.seg.handles.get(obj as object)
  if (known) return known
  const kind = Object.prototype.toString.call(obj).slice(8, -1) as Kind
  const id = c.seg.em.idOf(obj as never)
  return c.model.byId.get(`${kind}:${String(id)}`) ?? `?${kind}#${String(id)}`
}

/** The entity of a handle in the current EntityManager: as held, or loaded (load / find) or referenced. */
async function acquire(c: Ctx, h: Handle, mode: Acq, needLoaded = false): Promise<Loose> {
  const { em } = c.seg
  const held = c.seg.objs.get(h)
  if (held && (!needLoaded || em.isLoaded(held as never))) return held
  const kind = kindOf(h)
  const id = c.model.ids.get(h)
  if (id === undefined) throw new Error(`runner: ${h} has no id and no object in em#${c.seg.n}`)
  let obj: Loose
  if (mode === 'ref' && !needLoaded) {
    obj = em.ref(kind as 'Author', id) as unknown as Loose
  } else if (mode === 'find') {
    const found = (await em.find(kind as 'Author', { id })) as unknown as Loose[]
    expect(found, `find ${kind} id=${id} (${h})`).toHaveLength(1)
    obj = found[0]!
  } else {
    obj = (await em.load(kind as 'Author', id)) as unknown as Loose
  }
  if (held) expect(obj, `identity map: ${h} came back as another object`).toBe(held)
  remember(c, h, obj)
  if (em.isLoaded(obj as never)) checkEntity(c, h, obj)
  return obj
}

/** A loaded entity's properties equal the model's pending row: the row read, plus unflushed changes. */
function checkEntity(c: Ctx, h: Handle, obj: Loose): void {
  const row = c.model.pending.rows.get(h)
  if (!row) throw new Error(`runner: ${h} is not a live row`)
  const actual: Values = { h }
  const expected: Values = { h }
  for (const field of FIELDS[row.kind]) {
    if (c.seg.incremented.has(`${h}.${field}`)) continue // read back by the next flush
    const value = obj[field]
    actual[field] = REF[row.kind]?.field === field ? handleOf(c, value) : norm(field, value)
    expected[field] = norm(field, row.v[field])
  }
  expect(actual, `entity ${h} in em#${c.seg.n}`).toEqual(expected)
}

function pick<T>(list: readonly T[], n: number): T | undefined {
  return list.length === 0 ? undefined : list[n % list.length]
}

// ── operations ───────────────────────────────────────────────────────────────────────────────────

/** A unique value: fresh, or one given out before that no row holds now (null: no email). */
/** `replace`: the value of a committed row this EntityManager removed (replace by key). */
type UniqueChoice = { fresh: string } | { reuse: number } | { replace: number }

type Op =
  | { t: 'createAuthor'; name: string; email: UniqueChoice | null; rating?: string; createdAt?: Date }
  | { t: 'createBook'; title: string; pages?: number | null; status?: 'draft' | 'published'; meta?: Meta | null; author: number; tags: number[]; acq: Acq }
  | { t: 'createReview'; stars: number; body?: string | null; book: number; acq: Acq }
  | { t: 'createTag'; name: UniqueChoice }
  | { t: 'update'; kind: Kind; field: string; value: unknown; target: number; acq: Acq; via: 'setter' | 'em.assign' }
  | { t: 'upsert'; choice: { fresh: string } | { existing: number } }
  | { t: 'assignIds' }
  | { t: 'increment'; kind: 'Author' | 'Book' | 'Review'; field: 'rating' | 'pages' | 'stars'; by: number | string; target: number; acq: Acq }
  | { t: 'relink'; kind: 'Book' | 'Review'; target: number; to: number; via: 'property' | 'collection'; acq: Acq }
  | { t: 'link'; adds: boolean[]; book: number; tag: number; acq: Acq }
  | { t: 'remove'; kind: Kind; target: number; acq: Acq }
  | { t: 'mutate'; what: 'metaIsbn' | 'metaTags' | 'date'; text: string; date: Date; target: number }
  | { t: 'load'; kind: Kind; target: number; acq: 'load' | 'find'; populate: boolean }
  | { t: 'badValue'; which: number; target: number; acq: Acq }
  | { t: 'badCreate'; which: number; author: number }
  | { t: 'flush'; retry: boolean; fix: number }
  | { t: 'failingFlush'; how: 'newTag' | 'newAuthor' | 'renameTag' | 'emailAuthor'; source: number; target: number; extra: boolean; acq: Acq; retry: boolean; fix: number }
  | { t: 'newEm' }
  | { t: 'rolledBack'; inner: Op[]; flush: boolean }
  | { t: 'replaceByKey'; kind: UniqueKind; target: number; acq: Acq; how: 'create' | 'rename'; other: number }
  | { t: 'lockedLoad'; kind: Kind; target: number; how: 'load' | 'find'; strength: 'update' | 'share' }

const TRICKY = ['', ' ', 'NULL', 'null', '"', "'", '\\', '\\"', '{', '}', '{}', ',', 'a,b', '{"a"}', '(1,2)', 'x\ty', 'line\nbreak', '\r', 'é', 'ß', '🚀', '🇫🇷', 'Ω≈ç', '\u00a0', '\u200b', '\u0001']
const text = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...TRICKY) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }).filter((s) => !s.includes('\0')) },
  { weight: 2, arbitrary: fc.string({ maxLength: 8 }) },
)
const numeric = fc.oneof(
  fc.integer({ min: -1_000_000, max: 1_000_000 }).map(String),
  fc.tuple(fc.boolean(), fc.nat({ max: 99_999 }), fc.nat({ max: 9_999 })).map(([neg, i, f]) => `${neg ? '-' : ''}${i}.${String(f).padStart(4, '0')}`),
  fc.constantFrom('0', '0.0', '-0', '+7', '.5', '5.', '1e2', '1.5E-3', '-2.50e+1', '00012.3400', '123456789012345678901234567890.123456789'),
)
const int4 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })
const date = fc.date({ min: new Date('0001-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true })
const meta: fc.Arbitrary<Meta> = fc.record({ isbn: text, tags: fc.array(text, { maxLength: 3 }) }, { requiredKeys: [] })
const unique: fc.Arbitrary<UniqueChoice> = fc.oneof(
  { weight: 4, arbitrary: text.map((fresh) => ({ fresh })) },
  { weight: 1, arbitrary: fc.nat({ max: 20 }).map((reuse) => ({ reuse })) },
  { weight: 2, arbitrary: fc.nat({ max: 20 }).map((replace) => ({ replace })) },
)
const n = fc.nat({ max: 50 })
const acq = fc.constantFrom<Acq>('load', 'find', 'ref')
const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined })
const lit = <T extends string>(value: T) => fc.constant(value)

const updates: fc.Arbitrary<Op>[] = (
  [
    ['Author', 'name', text],
    ['Author', 'email', fc.option(unique, { nil: null })],
    ['Author', 'rating', numeric],
    ['Author', 'createdAt', date],
    ['Book', 'title', text],
    ['Book', 'pages', fc.option(int4, { nil: null })],
    ['Book', 'status', fc.constantFrom('draft', 'published')],
    ['Book', 'meta', fc.option(meta, { nil: null })],
    ['Review', 'stars', int4],
    ['Review', 'body', fc.option(text, { nil: null })],
    ['Tag', 'name', unique],
  ] as const
).map(([kind, field, value]) =>
  fc.record({ t: lit('update'), kind: lit(kind), field: lit(field), value: value as fc.Arbitrary<unknown>, target: n, acq, via: fc.constantFrom('setter' as const, 'em.assign' as const) }),
)

/** Operations that change the unit of work (or read into it) without flushing. */
const changes: fc.WeightedArbitrary<Op>[] = [
  { weight: 4, arbitrary: fc.record({ t: lit('createAuthor'), name: text, email: fc.option(unique, { nil: null }), rating: optional(numeric), createdAt: optional(date) }, { requiredKeys: ['t', 'name', 'email'] }) },
  {
    weight: 5,
    arbitrary: fc.record(
      { t: lit('createBook'), title: text, pages: optional(fc.option(int4, { nil: null })), status: optional(fc.constantFrom('draft' as const, 'published' as const)), meta: optional(fc.option(meta, { nil: null })), author: n, tags: fc.array(n, { maxLength: 3 }), acq },
      { requiredKeys: ['t', 'title', 'author', 'tags', 'acq'] },
    ),
  },
  { weight: 4, arbitrary: fc.record({ t: lit('createReview'), stars: int4, body: optional(fc.option(text, { nil: null })), book: n, acq }, { requiredKeys: ['t', 'stars', 'book', 'acq'] }) },
  { weight: 3, arbitrary: fc.record({ t: lit('createTag'), name: unique }) },
  { weight: 8, arbitrary: fc.oneof(...updates) },
  { weight: 1, arbitrary: fc.record({ t: lit('assignIds') }) },
  { weight: 3, arbitrary: fc.record({ t: lit('upsert'), choice: fc.oneof(text.map((fresh) => ({ fresh })), n.map((existing) => ({ existing }))) }) },
  {
    weight: 4,
    arbitrary: fc.oneof(
      fc.record({ t: lit('increment'), kind: lit('Book' as const), field: lit('pages' as const), by: fc.integer({ min: -1000, max: 1000 }), target: n, acq }),
      fc.record({ t: lit('increment'), kind: lit('Review' as const), field: lit('stars' as const), by: fc.integer({ min: -3, max: 3 }), target: n, acq }),
      fc.record({ t: lit('increment'), kind: lit('Author' as const), field: lit('rating' as const), by: numeric, target: n, acq }),
    ),
  },
  { weight: 4, arbitrary: fc.record({ t: lit('relink'), kind: fc.constantFrom('Book' as const, 'Review' as const), target: n, to: n, via: fc.constantFrom('property' as const, 'collection' as const), acq }) },
  // Several add()/remove() calls on one pair in a row: what a collection keeps pending must add up.
  { weight: 6, arbitrary: fc.record({ t: lit('link'), adds: fc.array(fc.boolean(), { minLength: 1, maxLength: 3 }), book: n, tag: n, acq }) },
  { weight: 4, arbitrary: fc.record({ t: lit('remove'), kind: fc.constantFrom(...KINDS), target: n, acq }) },
  { weight: 1, arbitrary: fc.record({ t: lit('mutate'), what: fc.constantFrom('metaIsbn' as const, 'metaTags' as const, 'date' as const), text, date, target: n }) },
  { weight: 2, arbitrary: fc.record({ t: lit('load'), kind: fc.constantFrom(...KINDS), target: n, acq: fc.constantFrom('load' as const, 'find' as const), populate: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ t: lit('badValue'), which: fc.nat({ max: 1000 }), target: n, acq }) },
  { weight: 1, arbitrary: fc.record({ t: lit('badCreate'), which: fc.nat({ max: 1000 }), author: n }) },
  // Remove a row that holds a unique value, and give that value to a new row or another one.
  {
    weight: 3,
    arbitrary: fc.record({ t: lit('replaceByKey'), kind: fc.constantFrom('Author' as const, 'Tag' as const), target: n, acq, how: fc.constantFrom('create' as const, 'rename' as const), other: n }),
  },
]

const operation: fc.Arbitrary<Op> = fc.oneof(
  ...changes,
  { weight: 5, arbitrary: fc.record({ t: lit('flush'), retry: fc.boolean(), fix: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({ t: lit('failingFlush'), how: fc.constantFrom('newTag' as const, 'newAuthor' as const, 'renameTag' as const, 'emailAuthor' as const), source: n, target: n, extra: fc.boolean(), acq, retry: fc.boolean(), fix: fc.nat() }),
  },
  { weight: 2, arbitrary: fc.record({ t: lit('newEm') }) },
  // em.transaction() around changes, a flush of them all and a throw: everything must be as before.
  // Not in-place changes of a Date or JSON value: no setter sees them, so a rollback cannot undo them
  // (documented on em.transaction); they stay pending like any change made before it.
  {
    weight: 2,
    arbitrary: fc.record({
      t: lit('rolledBack'),
      // Locking reads need a transaction: they run here only.
      inner: fc
        .array(fc.oneof(...changes, { weight: 12, arbitrary: fc.record({ t: lit('lockedLoad'), kind: fc.constantFrom(...KINDS), target: n, how: fc.constantFrom('load' as const, 'find' as const), strength: fc.constantFrom('update' as const, 'share' as const) }) }), { minLength: 1, maxLength: 4 })
        .filter((ops) => ops.every((o) => o.t !== 'mutate')),
      flush: fc.boolean(),
    }),
  },
)

/** A small committed graph each sequence starts from, so its first operations meet rows of the database. */
interface Setup {
  readonly authors: number
  readonly emails: boolean[]
  readonly books: number[]
  readonly reviews: number[]
  readonly tags: number
  readonly links: [number, number][]
}
const setup: fc.Arbitrary<Setup> = fc.record({
  authors: fc.integer({ min: 0, max: 3 }),
  emails: fc.array(fc.boolean(), { maxLength: 3 }),
  books: fc.array(n, { maxLength: 4 }),
  reviews: fc.array(n, { maxLength: 4 }),
  tags: fc.integer({ min: 0, max: 3 }),
  links: fc.array(fc.tuple(n, n), { maxLength: 5 }),
})

async function createSetup(c: Ctx, s: Setup): Promise<void> {
  const live = (kind: Kind) => c.model.pending.live(kind)
  for (let i = 0; i < s.authors; i++) createAuthor(c, { name: `author ${i}`, email: s.emails[i] ? c.model.fresh('Author', `author${i}`) : null })
  for (const [i, a] of s.books.entries()) {
    await createBook(c, { title: `book ${i}`, meta: i % 2 ? null : { isbn: `isbn ${i}`, tags: ['x'] }, author: await ensure(c, 'Author', a), tags: [], acq: 'ref' })
  }
  for (const b of s.reviews) await createReview(c, { stars: 3, book: await ensure(c, 'Book', b), acq: 'ref' })
  for (let i = 0; i < s.tags; i++) createTag(c, c.model.fresh('Tag', `tag ${i}`))
  for (const [b, t] of s.links) {
    const book = pick(live('Book'), b)
    const tag = pick(live('Tag'), t)
    if (!book || !tag) continue
    ;((await acquire(c, book, 'ref')).tags as Collection<Loose>).add(await acquire(c, tag, 'ref'))
    c.model.pending.links.add(`${book}>${tag}`)
    log(c, `${book}.tags.add(${tag})`)
  }
  await flushAndCheck(c, { retry: false, fix: 0 })
  c.seg = newSegment(c)
  log(c, 'new EntityManager')
}

function uniqueValue(c: Ctx, kind: UniqueKind, choice: UniqueChoice): string {
  if ('fresh' in choice) return c.model.fresh(kind, choice.fresh)
  if ('replace' in choice) return pick(c.model.replaceable(kind), choice.replace) ?? c.model.fresh(kind, 'replace')
  return pick(c.model.freed(kind), choice.reuse) ?? c.model.fresh(kind, 'reuse')
}

function createAuthor(c: Ctx, data: { name: string; email: string | null; rating?: string | undefined; createdAt?: Date | undefined }): Handle {
  const input: Values = { name: data.name }
  if (data.email !== null) input.email = data.email
  if (data.rating !== undefined) input.rating = data.rating
  if (data.createdAt !== undefined) input.createdAt = new Date(data.createdAt.getTime())
  const obj = c.seg.em.create('Author', input as never) as unknown as Loose
  const h = c.model.handle('Author')
  remember(c, h, obj)
  c.seg.keyPending.add(h)
  const v = { name: data.name, email: data.email, rating: data.rating ?? '0', createdAt: (obj.createdAt as Date).toISOString() }
  c.model.pending.rows.set(h, { kind: 'Author', v })
  log(c, `create ${h} ${show(input)}`)
  return h
}

async function createBook(c: Ctx, data: { title: string; pages?: number | null | undefined; status?: 'draft' | 'published' | undefined; meta?: Meta | null | undefined; author: Handle; tags: Handle[]; acq: Acq }): Promise<Handle> {
  const [author, ...tags] = await Promise.all([acquire(c, data.author, data.acq), ...data.tags.map((t) => acquire(c, t, data.acq))])
  const input: Values = { title: data.title, author }
  if (data.pages !== undefined) input.pages = data.pages
  if (data.status !== undefined) input.status = data.status
  if (data.meta !== undefined) input.meta = structuredClone(data.meta)
  if (tags.length > 0) input.tags = tags
  const obj = c.seg.em.create('Book', input as never) as unknown as Loose
  const h = c.model.handle('Book')
  remember(c, h, obj)
  const v = { title: data.title, pages: data.pages ?? null, status: data.status ?? 'draft', meta: structuredClone(data.meta ?? null), author: data.author }
  c.model.pending.rows.set(h, { kind: 'Book', v })
  for (const t of data.tags) c.model.pending.links.add(`${h}>${t}`)
  log(c, `create ${h} ${show({ ...input, author: data.author, tags: data.tags })}`)
  return h
}

async function createReview(c: Ctx, data: { stars: number; body?: string | null | undefined; book: Handle; acq: Acq }): Promise<Handle> {
  const book = await acquire(c, data.book, data.acq)
  const input: Values = { stars: data.stars, book }
  if (data.body !== undefined) input.body = data.body
  const obj = c.seg.em.create('Review', input as never) as unknown as Loose
  const h = c.model.handle('Review')
  remember(c, h, obj)
  c.model.pending.rows.set(h, { kind: 'Review', v: { stars: data.stars, body: data.body ?? null, book: data.book } })
  log(c, `create ${h} ${show({ ...input, book: data.book })}`)
  return h
}

function createTag(c: Ctx, name: string): Handle {
  const obj = c.seg.em.create('Tag', { name }) as unknown as Loose
  const h = c.model.handle('Tag')
  remember(c, h, obj)
  c.seg.keyPending.add(h)
  c.model.pending.rows.set(h, { kind: 'Tag', v: { name } })
  log(c, `create ${h} ${show({ name })}`)
  return h
}

/** A live row of `kind`, created (with its parents) when there is none. */
async function ensure(c: Ctx, kind: Kind, n: number): Promise<Handle> {
  const found = pick(c.model.pending.live(kind), n)
  if (found) return found
  switch (kind) {
    case 'Author':
      return createAuthor(c, { name: 'auto', email: null })
    case 'Book':
      return createBook(c, { title: 'auto', author: await ensure(c, 'Author', n), tags: [], acq: 'ref' })
    case 'Review':
      return createReview(c, { stars: 3, book: await ensure(c, 'Book', n), acq: 'ref' })
    case 'Tag':
      return createTag(c, c.model.fresh('Tag', 'auto'))
  }
}

function assign(c: Ctx, h: Handle, obj: Loose, field: string, value: unknown, viaAssign = false): void {
  if (viaAssign) c.seg.em.assign(obj as never, { [field]: value } as never)
  else obj[field] = value
  c.seg.incremented.delete(`${h}.${field}`) // an assignment replaces a pending increment
  const row = c.model.pending.rows.get(h)!
  if ((UNIQUE as Record<string, string>)[row.kind] === field) c.seg.keyPending.add(h)
  const ref = REF[row.kind]
  if (ref?.field === field) {
    row.v[field] = handleOf(c, value)
    c.seg.touched.add(h)
  } else {
    row.v[field] = value instanceof Date ? value.toISOString() : structuredClone(value)
  }
}

/**
 * `em.increment`: the model adds now (NULL stays NULL). A new entity's value changes at once; a
 * row's entity keeps showing the old value until a flush reads the new one back. A sum outside
 * int4 is not tried (the server would refuse it, which the model does not predict).
 */
async function increment(c: Ctx, op: Extract<Op, { t: 'increment' }>): Promise<boolean> {
  const h = pick(c.model.pending.live(op.kind), op.target)
  if (!h) return false
  const row = c.model.pending.rows.get(h)!
  const was = row.v[op.field]
  const sum = was === null || was === undefined ? was : op.field === 'rating' ? addDecimals(String(was), String(op.by)) : Number(was) + Number(op.by)
  if (typeof sum === 'number' && !(sum >= -(2 ** 31) && sum < 2 ** 31)) return false
  const obj = await acquire(c, h, op.acq)
  log(c, `increment ${h}.${op.field} by ${show(op.by)}${c.seg.em.isLoaded(obj as never) ? '' : ' (on a reference)'}`)
  tally(`increment ${op.kind}.${op.field}${c.model.ids.has(h) ? '' : ' (new entity)'}`)
  c.seg.em.increment(obj as never, op.field as never, op.by as never)
  row.v[op.field] = sum
  if (c.model.ids.has(h)) c.seg.incremented.add(`${h}.${op.field}`)
  return true
}

/** The model's own exact decimal sum (through `decimal()`'s normal form), independent of Flushwave's. */
function addDecimals(a: string, b: string): string {
  const parts = [decimal(a), decimal(b)].map((d) => {
    const [whole, fraction = ''] = d.replace('-', '').split('.')
    return { negative: d.startsWith('-'), whole: whole!, fraction }
  })
  const scale = Math.max(...parts.map((p) => p.fraction.length))
  const [x, y] = parts.map((p) => (p.negative ? -1n : 1n) * BigInt(p.whole + p.fraction.padEnd(scale, '0')))
  const sum = x! + y!
  const digits = (sum < 0n ? -sum : sum).toString().padStart(scale + 1, '0')
  return decimal(`${sum < 0n ? '-' : ''}${scale ? `${digits.slice(0, -scale)}.${digits.slice(-scale)}` : digits}`)
}

/**
 * `em.upsert('Tag', { name }, { onConflict: 'name' })`: a name no row has (a new row), or the name of
 * a committed tag this EntityManager has not renamed, which no other pending row holds (the upsert
 * meets that row: the entity the EntityManager holds for it is returned when loaded; otherwise the
 * row goes to the reference it holds, and the upsert's own entity is not the runner's to use).
 */
async function upsertTag(c: Ctx, op: Extract<Op, { t: 'upsert' }>): Promise<boolean> {
  const { model, seg } = c
  if ('fresh' in op.choice) {
    const name = model.fresh('Tag', op.choice.fresh)
    const obj = seg.em.upsert('Tag', { name }, { onConflict: 'name' }) as unknown as Loose
    const h = model.handle('Tag')
    remember(c, h, obj)
    seg.keyPending.add(h)
    seg.upserted.add(h)
    model.pending.rows.set(h, { kind: 'Tag', v: { name } })
    log(c, `upsert ${h} ${show({ name })} (no row has it)`)
    tally('upsert Tag (new row)')
    return true
  }
  const holders = (name: unknown) => [...model.pending.rows.values()].filter((row) => row.kind === 'Tag' && row.v.name === name).length
  const candidates = model.committed.live('Tag').filter((h) => {
    const name = model.committed.rows.get(h)!.v.name
    return model.pending.rows.get(h)?.v.name === name && holders(name) === 1
  })
  const h = pick(candidates, op.choice.existing)
  if (!h) return false
  const name = model.pending.rows.get(h)!.v.name as string
  const held = await acquire(c, h, 'ref')
  const loaded = seg.em.isLoaded(held as never)
  log(c, `upsert Tag ${show({ name })}: the key of ${h}${loaded ? '' : ' (held as a reference)'}`)
  tally(`upsert Tag (existing row${loaded ? ', loaded' : ', a reference held'})`)
  const obj = seg.em.upsert('Tag', { name }, { onConflict: 'name' })
  // The entity held is returned when it knows the key: loaded, or a reference the name was set on.
  const knows = (() => {
    try {
      return held.name === name
    } catch {
      return false // NotLoadedError: a reference that never had it
    }
  })()
  if (knows) expect(obj, `upsert of ${h}'s key returns the entity held`).toBe(held)
  else expect(obj, `upsert of ${h}'s key, held as a reference that does not know it`).not.toBe(held)
  return true
}

async function remove(c: Ctx, h: Handle, mode: Acq): Promise<void> {
  const obj = await acquire(c, h, mode)
  if (!c.seg.em.isLoaded(obj as never) && !c.seg.keyKnown.has(h)) c.seg.removedUnread.add(h)
  c.seg.em.remove(obj as never)
  c.seg.objs.delete(h)
  c.seg.removed.push(obj)
  c.model.pending.remove(h)
}

/** Values no column of theirs accepts: each must throw InvalidValueError at assignment, changing nothing. */
const BAD: readonly { kind: Kind; field: string; value: () => unknown }[] = [
  { kind: 'Author', field: 'name', value: () => 'a\0b' },
  { kind: 'Author', field: 'name', value: () => null },
  { kind: 'Author', field: 'name', value: () => undefined },
  { kind: 'Author', field: 'name', value: () => 42 },
  { kind: 'Author', field: 'email', value: () => 'x\0@y' },
  { kind: 'Author', field: 'rating', value: () => 'abc' },
  { kind: 'Author', field: 'rating', value: () => '1.2.3' },
  { kind: 'Author', field: 'rating', value: () => '' },
  { kind: 'Author', field: 'rating', value: () => Number.NaN },
  { kind: 'Author', field: 'rating', value: () => Number.POSITIVE_INFINITY },
  { kind: 'Author', field: 'createdAt', value: () => new Date(Number.NaN) },
  { kind: 'Author', field: 'createdAt', value: () => new Date('+010000-01-01T00:00:00.000Z') },
  { kind: 'Author', field: 'createdAt', value: () => new Date('-000001-06-01T00:00:00.000Z') },
  { kind: 'Author', field: 'createdAt', value: () => '2020-01-01' },
  { kind: 'Book', field: 'title', value: () => null },
  { kind: 'Book', field: 'title', value: () => 'x\0' },
  { kind: 'Book', field: 'pages', value: () => 2 ** 31 },
  { kind: 'Book', field: 'pages', value: () => -(2 ** 31) - 1 },
  { kind: 'Book', field: 'pages', value: () => 1.5 },
  { kind: 'Book', field: 'pages', value: () => '3' },
  { kind: 'Book', field: 'status', value: () => 'gone' },
  { kind: 'Book', field: 'status', value: () => null },
  { kind: 'Book', field: 'meta', value: () => undefined },
  { kind: 'Book', field: 'meta', value: () => ({ isbn: 'a\0b' }) },
  { kind: 'Book', field: 'meta', value: () => ({ tags: ['\ud800'] }) },
  { kind: 'Book', field: 'meta', value: () => ({ isbn: 1n }) },
  { kind: 'Book', field: 'author', value: () => null },
  { kind: 'Book', field: 'author', value: () => db.orm.em().ref('Author', 1) },
  { kind: 'Review', field: 'stars', value: () => null },
  { kind: 'Review', field: 'stars', value: () => 0.5 },
  { kind: 'Review', field: 'book', value: () => null },
  { kind: 'Tag', field: 'name', value: () => null },
  { kind: 'Tag', field: 'name', value: () => '\0' },
]

/** create() calls that must throw and create nothing (the next flush would write a leftover). */
const BAD_CREATES: readonly { label: string; make: (c: Ctx, author: Loose) => void }[] = [
  { label: 'Book with tags: "x"', make: (c, author) => c.seg.em.create('Book', { title: 'bad', author: author as never, tags: 'x' as never }) },
  { label: 'Book with a tag of another EntityManager', make: (c, author) => c.seg.em.create('Book', { title: 'bad', author: author as never, tags: [db.orm.em().ref('Tag', 1)] }) },
  {
    label: 'Book with a removed tag',
    make: (c, author) => {
      const removedTag = c.seg.removed.find((e) => Object.prototype.toString.call(e) === '[object Tag]') ?? db.orm.em().ref('Tag', 1)
      c.seg.em.create('Book', { title: 'bad', author: author as never, tags: [removedTag as never] })
    },
  },
  { label: 'Author with a NUL in its name', make: (c) => c.seg.em.create('Author', { name: 'a\0' }) },
  { label: 'Review with stars 2^31', make: (c) => c.seg.em.create('Review', { stars: 2 ** 31, book: db.orm.em().ref('Book', 1) }) },
  { label: 'Tag with an id', make: (c) => c.seg.em.create('Tag', { id: 5, name: 'x' } as never) },
]

async function step(c: Ctx, op: Op): Promise<boolean> {
  const { model } = c
  const live = (kind: Kind) => model.pending.live(kind)
  switch (op.t) {
    case 'createAuthor':
      createAuthor(c, { name: op.name, email: op.email && uniqueValue(c, 'Author', op.email), rating: op.rating, createdAt: op.createdAt })
      return true
    case 'createBook': {
      const author = await ensure(c, 'Author', op.author)
      const linkable = live('Tag').filter((t) => !c.seg.upserted.has(t))
      const tags = [...new Set(op.tags.map((t) => pick(linkable, t)).filter((t) => t !== undefined))]
      await createBook(c, { ...op, author, tags })
      return true
    }
    case 'createReview':
      await createReview(c, { ...op, book: await ensure(c, 'Book', op.book) })
      return true
    case 'createTag':
      createTag(c, uniqueValue(c, 'Tag', op.name))
      return true
    case 'update': {
      const h = pick(live(op.kind), op.target)
      if (!h) return false
      if (op.kind === 'Tag' && c.seg.upserted.has(h)) return false // its name is its pending upsert's key
      const value =
        op.field === 'email' || (op.kind === 'Tag' && op.field === 'name')
          ? op.value === null ? null : uniqueValue(c, op.kind as UniqueKind, op.value as UniqueChoice)
          : op.value instanceof Date ? new Date(op.value.getTime()) : structuredClone(op.value)
      const obj = await acquire(c, h, op.acq)
      log(c, `${op.via === 'em.assign' ? `em.assign(${h}, { ${op.field} })` : `${h}.${op.field}`} = ${show(value)}${op.acq === 'ref' && !c.seg.em.isLoaded(obj as never) ? ' (on a reference)' : ''}`)
      assign(c, h, obj, op.field, value, op.via === 'em.assign')
      return true
    }
    case 'increment':
      return increment(c, op)
    case 'upsert':
      return upsertTag(c, op)
    case 'assignIds': {
      // Every new entity without an id gets one now (upserted ones aside: theirs is the row's), and keeps it.
      const without = [...c.seg.objs].filter(([h, obj]) => !model.ids.has(h) && c.seg.em.idOf(obj as never) === undefined && model.pending.rows.has(h))
      log(c, `assignIds (${without.length} new without an id)`)
      tally(`assignIds${without.length === 0 ? ' (none missing)' : ''}`)
      await c.seg.em.assignIds()
      for (const [h, obj] of without) {
        const id = c.seg.em.idOf(obj as never)
        if (c.seg.upserted.has(h)) expect(id, `${h} is upserted: its id is its row's`).toBeUndefined()
        else {
          expect(typeof id, `id of ${h} after assignIds`).toBe('number')
          c.seg.firstIds.set(h, id)
        }
      }
      return true
    }
    case 'relink': {
      const ref = REF[op.kind]!
      const h = pick(live(op.kind), op.target)
      const to = pick(live(ref.target), op.to)
      if (!h || !to) return false
      const [obj, parent] = await Promise.all([acquire(c, h, op.acq), acquire(c, to, op.acq)])
      log(c, op.via === 'property' ? `${h}.${ref.field} = ${to}` : `${to}.${ref.inverse}.add(${h})`)
      if (op.via === 'collection') {
        ;(parent[ref.inverse] as Collection<Loose>).add(obj)
        model.pending.rows.get(h)!.v[ref.field] = to
        c.seg.touched.add(h)
      } else {
        assign(c, h, obj, ref.field, parent)
      }
      return true
    }
    case 'link': {
      const b = pick(live('Book'), op.book)
      const t = pick(live('Tag').filter((x) => !c.seg.upserted.has(x)), op.tag)
      if (!b || !t) return false
      const [book, tag] = await Promise.all([acquire(c, b, op.acq), acquire(c, t, op.acq)])
      const tags = book.tags as Collection<Loose>
      const calls = op.adds.map((add) => `${add ? 'add' : 'remove'}(${t})`).join(', ')
      log(c, `${b}.tags: ${calls}${tags.isLoaded ? '' : ' (collection not loaded)'}`)
      for (const add of op.adds) {
        if (add) {
          tags.add(tag)
          model.pending.links.add(`${b}>${t}`)
        } else {
          tags.remove(tag)
          model.pending.links.delete(`${b}>${t}`)
        }
      }
      return true
    }
    case 'replaceByKey': {
      const field = UNIQUE[op.kind]
      const h = pick(live(op.kind).filter((x) => model.committed.rows.get(x)?.v[field] === model.pending.rows.get(x)!.v[field] && typeof model.pending.rows.get(x)!.v[field] === 'string'), op.target)
      if (!h) return false
      const value = model.pending.rows.get(h)!.v[field] as string
      log(c, `replace by key: remove ${h}, then ${op.how === 'create' ? 'a new' : 'another'} ${op.kind} takes ${field} ${show(value)}`)
      await remove(c, h, op.acq)
      const other = pick(live(op.kind).filter((x) => !c.seg.upserted.has(x)), op.other)
      if (op.how === 'rename' && other) assign(c, other, await acquire(c, other, op.acq), field, value)
      else if (op.kind === 'Tag') createTag(c, value)
      else createAuthor(c, { name: 'replacing', email: value })
      return true
    }
    case 'remove': {
      const h = pick(live(op.kind), op.target)
      if (!h) return false
      log(c, `remove ${h}`)
      await remove(c, h, op.acq)
      return true
    }
    case 'mutate': {
      const kind = op.what === 'date' ? 'Author' : 'Book'
      const h = pick(live(kind), op.target)
      if (!h) return false
      const obj = await acquire(c, h, 'load', true)
      const row = model.pending.rows.get(h)!
      if (op.what === 'date') {
        log(c, `${h}.createdAt.setTime(${op.date.toISOString()}) in place`)
        ;(obj.createdAt as Date).setTime(op.date.getTime())
        row.v.createdAt = op.date.toISOString()
        return true
      }
      const value = obj.meta as Meta | null
      if (value === null) return false
      const mirror = row.v.meta as Meta
      log(c, `${h}.meta.${op.what === 'metaIsbn' ? `isbn = ${show(op.text)}` : `tags.push(${show(op.text)})`} in place`)
      if (op.what === 'metaIsbn') {
        value.isbn = op.text
        mirror.isbn = op.text
      } else {
        ;(value.tags ??= []).push(op.text)
        ;(mirror.tags ??= []).push(op.text)
      }
      return true
    }
    case 'load':
      return load(c, op)
    case 'badValue': {
      // Every bad value of one kind, on one of its entities.
      const kind = KINDS[op.which % KINDS.length]!
      const h = pick(live(kind), op.target)
      if (!h) return false
      const obj = await acquire(c, h, op.acq)
      log(c, `${h}: bad values must throw InvalidValueError and change nothing`)
      for (const bad of BAD.filter((b) => b.kind === kind)) {
        const value = bad.value()
        expect(() => (obj[bad.field] = value), `${h}.${bad.field} = ${show(value)}`).toThrow(InvalidValueError)
      }
      if (c.seg.em.isLoaded(obj as never)) checkEntity(c, h, obj)
      return true
    }
    case 'badCreate': {
      const bad = BAD_CREATES[op.which % BAD_CREATES.length]!
      const author = await acquire(c, await ensure(c, 'Author', op.author), 'ref')
      log(c, `create ${bad.label} must throw and create nothing`)
      let thrown: unknown
      try {
        bad.make(c, author)
      } catch (error) {
        thrown = error
      }
      expect(thrown, bad.label).toBeDefined()
      expect([InvalidValueError, EntityStateError].some((E) => thrown instanceof E), `${bad.label}: ${String(thrown)}`).toBe(true)
      return true
    }
    case 'flush':
      await flushAndCheck(c, op)
      return true
    case 'failingFlush':
      await failingFlushOp(c, op)
      return true
    case 'rolledBack':
      await rolledBack(c, op)
      return true
    case 'lockedLoad': {
      // Read again under a lock: the entity keeps its identity and shows the row plus its unflushed changes.
      const h = pick(model.pending.live(op.kind), op.target)
      const id = h === undefined ? undefined : model.ids.get(h)
      if (h === undefined || id === undefined) return false
      log(c, `${op.how} ${h} for ${op.strength}`)
      tally(`lockedLoad ${op.kind} (inside a transaction)`)
      const { em } = c.seg
      const lock = { lock: op.strength }
      const obj = (op.how === 'load' ? await em.load(op.kind as 'Author', id, lock) : (await em.find(op.kind as 'Author', { id }, lock))[0]) as unknown as Loose
      const held = c.seg.objs.get(h)
      if (held) expect(obj, `identity map: ${h} came back as another object`).toBe(held)
      remember(c, h, obj)
      checkEntity(c, h, obj)
      return true
    }
    case 'newEm':
      c.seg = newSegment(c)
      model.pending = model.committed.clone()
      log(c, 'new EntityManager (pending changes of the last one dropped)')
      return true
  }
}

/**
 * Changes inside `em.transaction()`, flushed there when the model says that flush succeeds (with
 * every change pending from before), then a throw. Afterwards the database holds what it held, and
 * the EntityManager what it held: the model's pending world and the runner's view of the
 * EntityManager go back to what they were, and every entity the runner still holds must agree.
 */
async function rolledBack(c: Ctx, op: Extract<Op, { t: 'rolledBack' }>): Promise<void> {
  const { model, seg } = c
  const pending = model.pending.clone()
  const view = {
    objs: new Map(seg.objs),
    handles: new Map(seg.handles),
    touched: new Set(seg.touched),
    removed: [...seg.removed],
    sets: [seg.removedUnread, seg.keyKnown, seg.keyPending, seg.incremented, seg.upserted].map((set) => [set, new Set<string>(set)] as const),
  }
  const marker = new Error('roll back')
  log(c, 'transaction {')
  const thrown = await seg.em
    .transaction(async () => {
      for (const inner of op.inner) await step(c, inner)
      if (op.flush && predict(c) === undefined) {
        log(c, '  flush inside the transaction')
        tally('flush inside a rolled-back transaction')
        await seg.em.flush()
      }
      throw marker
    })
    .catch((e: unknown) => e)
  if (thrown !== marker) throw new Error(`the transaction threw ${String(thrown)}, not the callback's error`, { cause: thrown })
  log(c, '} rolled back')
  model.pending = pending
  const restore = <K, V>(map: Map<K, V>, from: Map<K, V>) => (map.clear(), from.forEach((v, k) => map.set(k, v)))
  restore(seg.objs, view.objs)
  restore(seg.handles, view.handles)
  seg.touched.clear()
  for (const h of view.touched) seg.touched.add(h)
  seg.removed.splice(0, seg.removed.length, ...view.removed)
  for (const [set, was] of view.sets) {
    set.clear()
    for (const h of was) set.add(h)
  }
  // A new entity keeps the id it had before (from the pool at create); one a flush inside gave it went back.
  for (const [h, obj] of seg.objs) if (!model.ids.has(h)) expect(seg.em.idOf(obj as never), `id of ${h} after a rolled-back transaction`).toBe(seg.firstIds.get(h))
  await compareDatabase(c)
  checkLoaded(c)
}

async function load(c: Ctx, op: Extract<Op, { t: 'load' }>): Promise<boolean> {
  const { model } = c
  const h = pick(model.pending.live(op.kind), op.target)
  if (!h) return false
  log(c, `${op.acq} ${h}${op.populate ? ' and populate its relations' : ''}`)
  const obj = await acquire(c, h, op.acq, true)
  checkEntity(c, h, obj)
  if (!op.populate) return true
  const handles = (items: readonly unknown[]) => items.map((e) => handleOf(c, e)).sort()
  const children = (kind: Kind, field: string) => model.pending.live(kind).filter((x) => model.pending.rows.get(x)!.v[field] === h).sort()
  const { em } = c.seg
  // A parent removed in this EntityManager is not loaded by populate (checkEntity saw the reference).
  const checkParent = (parent: unknown) => {
    const p = handleOf(c, parent)
    if (model.pending.rows.has(p)) checkEntity(c, p, parent as Loose)
  }
  switch (op.kind) {
    case 'Author':
      await em.populate(obj as never, 'books' as never)
      expect(handles((obj.books as Collection<Loose>).items), `${h}.books`).toEqual(children('Book', 'author'))
      break
    case 'Book': {
      await em.populate(obj as never, 'reviews' as never, 'tags' as never, 'author' as never)
      expect(handles((obj.reviews as Collection<Loose>).items), `${h}.reviews`).toEqual(children('Review', 'book'))
      const linked = [...model.pending.links].filter((l) => l.startsWith(`${h}>`)).map((l) => l.split('>')[1]!)
      expect(handles((obj.tags as Collection<Loose>).items), `${h}.tags`).toEqual(linked.sort())
      checkParent(obj.author)
      break
    }
    case 'Review':
      await em.populate(obj as never, 'book' as never)
      checkParent(obj.book)
      break
    case 'Tag':
      break
  }
  return true
}

async function failingFlushOp(c: Ctx, op: Extract<Op, { t: 'failingFlush' }>): Promise<void> {
  const { model } = c
  if (op.extra) {
    // Valid changes in the same unit of work, which the flush after the fix must write.
    const author = createAuthor(c, { name: 'extra', email: model.fresh('Author', 'extra') })
    const book = await createBook(c, { title: 'extra', author, tags: [], acq: op.acq })
    await createReview(c, { stars: 5, book, acq: op.acq })
  }
  const valueOf = (h: Handle) => model.pending.rows.get(h)!.v
  let how = op.how
  const tags = model.pending.live('Tag')
  const emailed = model.pending.live('Author').filter((h) => valueOf(h).email !== null)
  if (how === 'renameTag' && tags.length < 2) how = 'newTag'
  if (how === 'emailAuthor' && (emailed.length < 1 || model.pending.live('Author').length < 2)) how = 'newAuthor'
  if (how === 'newTag') {
    const source = pick(tags, op.source) ?? createTag(c, model.fresh('Tag', 'held'))
    log(c, `duplicate: a new Tag named like ${source}`)
    createTag(c, valueOf(source).name as string)
  } else if (how === 'newAuthor') {
    const source = pick(emailed, op.source) ?? createAuthor(c, { name: 'held', email: model.fresh('Author', 'held') })
    log(c, `duplicate: a new Author with the email of ${source}`)
    createAuthor(c, { name: 'dup', email: valueOf(source).email as string })
  } else {
    const kind = how === 'renameTag' ? 'Tag' : 'Author'
    const field = UNIQUE[kind]
    const source = pick(how === 'renameTag' ? tags : emailed, op.source)!
    const target = pick(model.pending.live(kind).filter((h) => h !== source && !c.seg.upserted.has(h)), op.target)
    if (target === undefined) return // only upserted tags to rename: their names are their keys
    const obj = await acquire(c, target, op.acq)
    log(c, `duplicate: ${target}.${field} = ${source}'s ${show(valueOf(source)[field])}`)
    assign(c, target, obj, field, valueOf(source)[field])
  }
  expect(issues(c).unique, 'the model must see the duplicate').not.toEqual([])
  await flushAndCheck(c, op)
}

// ── flushes ──────────────────────────────────────────────────────────────────────────────────────

interface Issues {
  /** Live rows sharing a unique value. */
  readonly unique: { kind: UniqueKind; value: string; holders: Handle[] }[]
  /**
   * Live rows whose parent is removed. 'client': the flush writes that reference (new row, or a
   * changed one), so it refuses before sending anything; 'server': the database refuses the delete
   * (NO ACTION); 'either': set on a reference never loaded, which the flush writes as it is.
   */
  readonly orphans: { child: Handle; parent: Handle; by: 'client' | 'server' | 'either' }[]
  /**
   * Live rows written with the unique value of a committed row removed here. Flushwave deletes that
   * row first (replace by key) when it was read and no pending row refers to it, now or before this
   * flush; otherwise the flush fails (a unique or foreign-key violation, or a client-side refusal).
   */
  readonly replaced: { kind: UniqueKind; value: string; holder: Handle; removed: Handle; clean: boolean }[]
}

function issues(c: Ctx): Issues {
  const { committed, pending } = c.model
  const unique: Issues['unique'] = []
  for (const kind of ['Author', 'Tag'] as const) {
    const holders = new Map<string, Handle[]>()
    for (const h of pending.live(kind)) {
      const value = pending.rows.get(h)!.v[UNIQUE[kind]]
      if (typeof value === 'string') holders.set(value, [...(holders.get(value) ?? []), h])
    }
    for (const [value, list] of holders) if (list.length > 1) unique.push({ kind, value, holders: list })
  }
  const orphans: Issues['orphans'] = []
  for (const [child, row] of pending.rows) {
    const ref = REF[row.kind]
    if (!ref) continue
    const parent = row.v[ref.field] as Handle
    if (pending.rows.has(parent)) continue
    const before = committed.rows.get(child)
    const obj = c.seg.objs.get(child)
    const by =
      !before || before.v[ref.field] !== parent ? 'client' : c.seg.touched.has(child) && obj && !c.seg.em.isLoaded(obj as never) ? 'either' : 'server'
    orphans.push({ child, parent, by })
  }
  const replaced: Issues['replaced'] = []
  for (const kind of ['Author', 'Tag'] as const) {
    const freedBy = new Map<string, Handle>()
    for (const [h, row] of committed.rows) {
      const value = row.v[UNIQUE[kind]]
      if (row.kind === kind && !pending.rows.has(h) && typeof value === 'string') freedBy.set(value, h)
    }
    if (freedBy.size === 0) continue
    for (const h of pending.live(kind)) {
      const value = pending.rows.get(h)!.v[UNIQUE[kind]]
      const removed = typeof value === 'string' ? freedBy.get(value) : undefined
      if (removed === undefined) continue
      // Rows removed here that refer to it (and to those, …) go first with it, as Flushwave does.
      const group = new Set<Handle>([removed])
      const refOf = (row: Row) => (REF[row.kind] ? (row.v[REF[row.kind]!.field] as Handle) : undefined)
      for (let grew = true; grew; ) {
        grew = false
        for (const [x, row] of committed.rows) {
          if (pending.rows.has(x) || group.has(x) || !group.has(refOf(row)!)) continue
          group.add(x)
          grew = true
        }
      }
      const kinds = new Set([...group].map(kindOf))
      const refersNow = [...pending.rows.values()].some((row) => group.has(refOf(row)!))
      const referredBefore = [...committed.rows].some(([x, row]) => group.has(refOf(row)!) && pending.rows.has(x))
      // A row removed here without its values read may refer to one of them unseen.
      const unread = [...c.seg.removedUnread].some((x) => committed.rows.has(x) && !pending.rows.has(x) && (group.has(x) || kinds.has(REF[kindOf(x)]?.target as Kind)))
      replaced.push({ kind, value: value as string, holder: h, removed, clean: !unread && !refersNow && !referredBefore })
    }
  }
  return { unique, orphans, replaced }
}

type ErrorClass = abstract new (...args: never[]) => Error

/** The errors a flush of the pending changes may throw, first to last in the pipeline; none: it succeeds. */
function predict(c: Ctx): { errors: ErrorClass[]; constraints: string[]; why: string } | undefined {
  const { unique, orphans } = issues(c)
  const blocked = issues(c).replaced.filter((r) => !r.clean)
  if (unique.length + orphans.length + blocked.length === 0) return undefined
  const why = [
    ...unique.map((u) => `${u.holders.join(', ')} share ${UNIQUE[u.kind]} ${show(u.value)}`),
    ...orphans.map((o) => `${o.child} refers to removed ${o.parent} (${o.by})`),
    ...blocked.map((r) => `${r.holder} takes ${UNIQUE[r.kind]} ${show(r.value)} of removed ${r.removed}, which cannot go first`),
  ].join('; ')
  if (blocked.length > 0 && !orphans.some((o) => o.by === 'client')) {
    // Deleted first, the removed row trips a reference still in the table; kept last, its key clashes.
    const refs = (['Book', 'Review'] as const).map((k) => `${TABLE[k]}_${REF[k]!.field}_id_fkey`)
    // One blocked replacement keeps every one last (Flushwave's replace by key is all or nothing), so
    // the clean ones clash too.
    const keys = [...unique.map((u) => u.kind), ...issues(c).replaced.map((r) => r.kind)].map((k) => `${TABLE[k]}_${UNIQUE[k]}_key`)
    return { errors: [EntityStateError, UniqueViolationError, ForeignKeyViolationError], constraints: [...keys, ...refs], why }
  }
  if (orphans.some((o) => o.by === 'client')) return { errors: [EntityStateError], constraints: [], why }
  const errors: ErrorClass[] = orphans.some((o) => o.by === 'either') ? [EntityStateError] : []
  // Inserts and updates run before deletes: a unique violation comes first.
  if (unique.length > 0) {
    errors.push(UniqueViolationError)
    return { errors, constraints: unique.map((u) => `${TABLE[u.kind]}_${UNIQUE[u.kind]}_key`), why }
  }
  errors.push(ForeignKeyViolationError)
  return { errors, constraints: orphans.map((o) => `${TABLE[kindOf(o.child)]}_${REF[kindOf(o.child)]!.field}_id_fkey`), why }
}

async function flushAndCheck(c: Ctx, op: { retry: boolean; fix: number }): Promise<void> {
  for (const r of issues(c).replaced) tally(r.clean ? 'flush replacing by key' : 'flush whose replace by key is blocked')
  const expected = predict(c)
  if (expected) {
    await expectFailedFlush(c, expected)
    if (op.retry) await expectFailedFlush(c, expected)
    await fix(c, op.fix)
  }
  await expectFlush(c)
}

async function expectFailedFlush(c: Ctx, expected: NonNullable<ReturnType<typeof predict>>): Promise<void> {
  const { em } = c.seg
  const names = expected.errors.map((e) => e.name).join(' or ')
  log(c, `flush, expecting ${names}: ${expected.why}`)
  const sent = db.queries.length
  counters.flushes++
  counters.failing++
  const error = await em.flush().then(
    () => undefined,
    (e: unknown) => e,
  )
  if (error === undefined) throw new Error(`flush succeeded, but the model expected ${names}: ${expected.why}`)
  if (!expected.errors.some((E) => error instanceof E)) {
    throw new Error(`flush threw ${String(error)}, but the model expected ${names}: ${expected.why}`, { cause: error })
  }
  tally(`failed flush: ${(error as Error).name}${error instanceof FlushError ? ` ${error.constraint}` : ''}`)
  for (const by of new Set(issues(c).orphans.map((o) => o.by))) tally(`failed flush with orphans (${by}): ${(error as Error).name}`)
  if (error instanceof FlushError) expect(expected.constraints, `constraint of ${String(error)}`).toContain(error.constraint)
  if (error instanceof EntityStateError) {
    expect(db.queries.slice(sent).filter((q) => q.phase === 'write'), 'an EntityStateError flush sends no write').toEqual([])
  }
  // The EntityManager is as it was: new entities still have no id.
  for (const [h, obj] of c.seg.objs) if (!c.model.ids.has(h)) expect(em.idOf(obj as never), `id of ${h} after a failed flush`).toBe(c.seg.firstIds.get(h))
  await compareDatabase(c)
  checkLoaded(c)
}

/** Fixes what makes the flush fail, one issue at a time, the way `fix`'s bits choose. */
async function fix(c: Ctx, bits: number): Promise<void> {
  const { model } = c
  for (let round = 0; ; round++) {
    if (round > 500) throw new Error('runner: the fix does not converge')
    const { unique, orphans } = issues(c)
    const choice = (bits >>> round % 30) & 1
    const mode: Acq = (bits >>> (round + 7) % 30) & 1 ? 'load' : 'ref'
    const u = unique[0]
    if (u) {
      // Keep the row whose committed value it is (a delete runs after the inserts, so removing
      // that one instead would still clash); rename or remove another.
      const keeper = u.holders.find((h) => model.committed.rows.get(h)?.v[UNIQUE[u.kind]] === u.value) ?? u.holders[0]
      // An upserted tag's name is its key: it is removed, never renamed.
      const offender = u.holders.find((h) => h !== keeper && !c.seg.upserted.has(h)) ?? u.holders.find((h) => h !== keeper)!
      if (choice === 0 && !c.seg.upserted.has(offender)) {
        const value = model.fresh(u.kind, 'fixed')
        log(c, `fix: ${offender}.${UNIQUE[u.kind]} = ${show(value)}`)
        assign(c, offender, await acquire(c, offender, mode), UNIQUE[u.kind], value)
      } else {
        log(c, `fix: remove ${offender}`)
        await remove(c, offender, mode)
      }
      continue
    }
    const b = issues(c).replaced.find((r) => !r.clean)
    if (b && orphans.length === 0) {
      const value = model.fresh(b.kind, 'fixed')
      log(c, `fix: ${b.holder}.${UNIQUE[b.kind]} = ${show(value)}`)
      assign(c, b.holder, await acquire(c, b.holder, mode), UNIQUE[b.kind], value)
      continue
    }
    const o = orphans[0]
    if (!o) return
    const kind = kindOf(o.child)
    const ref = REF[kind]!
    const other = pick(model.pending.live(ref.target), bits)
    if (choice === 0 && other) {
      log(c, `fix: ${o.child}.${ref.field} = ${other}`)
      const [obj, parent] = await Promise.all([acquire(c, o.child, mode), acquire(c, other, mode)])
      assign(c, o.child, obj, ref.field, parent)
    } else {
      log(c, `fix: remove ${o.child}`)
      await remove(c, o.child, mode)
    }
  }
}

async function expectFlush(c: Ctx): Promise<void> {
  const { model } = c
  const { em } = c.seg
  const counts = expectedCounts(model.committed, model.pending)
  log(c, 'flush')
  counters.flushes++
  let result: FlushResult
  try {
    result = await em.flush()
  } catch (error) {
    throw new Error(`flush threw ${String(error)}, but the model expected it to succeed`, { cause: error })
  }
  for (const [h] of model.pending.rows) {
    if (model.ids.has(h)) continue
    const id = em.idOf(c.seg.objs.get(h) as never)
    expect(typeof id, `id of ${h} after its flush`).toBe('number')
    if (c.seg.firstIds.get(h) !== undefined) expect(id, `${h} inserted with the id it took at create`).toBe(c.seg.firstIds.get(h))
    model.ids.set(h, id as number)
    model.byId.set(`${kindOf(h)}:${String(id)}`, h)
  }
  const nonZero = (counts: Readonly<Record<string, number>>) => Object.fromEntries(Object.entries(counts).filter(([, n]) => n !== 0))
  // Tags upserted under a name no row had were inserted, and are counted as upserted.
  const fresh = [...c.seg.upserted].filter((h) => model.pending.rows.has(h)).length
  const inserted = fresh === 0 ? result.inserted : { ...result.inserted, tag: (result.inserted.tag ?? 0) + fresh }
  expect(result.upserted.tag ?? 0, 'FlushResult.upserted').toBeGreaterThanOrEqual(fresh)
  expect(nonZero(inserted), 'FlushResult.inserted (and upserted new rows)').toEqual(counts.inserted)
  expect(nonZero(result.deleted), 'FlushResult.deleted').toEqual(counts.deleted)
  for (const [table, n] of Object.entries(counts.changed)) expect(result.updated[table] ?? 0, `FlushResult.updated.${table}`).toBeGreaterThanOrEqual(n)
  model.committed = model.pending.clone()
  c.seg.touched.clear()
  // Each incremented property now shows the value the UPDATE returned (on references too).
  for (const key of c.seg.incremented) {
    const [h, field] = key.split('.') as [Handle, string]
    const row = model.pending.rows.get(h)
    if (row) expect(norm(field, c.seg.objs.get(h)![field]), `${key} read back after the flush`).toEqual(norm(field, row.v[field]))
  }
  c.seg.incremented.clear()
  c.seg.upserted.clear()
  for (const h of c.seg.keyPending) c.seg.keyKnown.add(h)
  c.seg.keyPending.clear()
  await compareDatabase(c)
  checkLoaded(c)
}

/** Every loaded entity the EntityManager holds agrees with the model (after a flush, failed or not). */
function checkLoaded(c: Ctx): void {
  for (const [h, obj] of c.seg.objs) if (c.model.pending.rows.has(h) && c.seg.em.isLoaded(obj as never)) checkEntity(c, h, obj)
}

/** Rows a flush from `before` to `after` inserts and deletes (exactly), and changes (at least). */
function expectedCounts(before: World, after: World) {
  const inserted: Record<string, number> = {}
  const deleted: Record<string, number> = {}
  const changed: Record<string, number> = {}
  const add = (counts: Record<string, number>, table: string) => (counts[table] = (counts[table] ?? 0) + 1)
  for (const [h, row] of after.rows) {
    const old = before.rows.get(h)
    if (!old) add(inserted, TABLE[row.kind])
    else if (FIELDS[row.kind].some((f) => !isDeepEqual(norm(f, old.v[f]), norm(f, row.v[f])))) add(changed, TABLE[row.kind])
  }
  for (const [h, row] of before.rows) if (!after.rows.has(h)) add(deleted, TABLE[row.kind])
  for (const link of after.links) if (!before.links.has(link)) add(inserted, 'book_tag')
  for (const link of before.links) if (!after.links.has(link)) add(deleted, 'book_tag')
  return { inserted, deleted, changed }
}

function isDeepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  return ka.length === kb.length && ka.every((k) => isDeepEqual((a as Values)[k], (b as Values)[k]))
}

/** Every row of the five tables, read with raw SQL, against the model's committed world. */
async function compareDatabase(c: Ctx): Promise<void> {
  const { model } = c
  const h = (kind: Kind, id: unknown) => model.byId.get(`${kind}:${String(id)}`) ?? `?${TABLE[kind]}#${String(id)}`
  const [authors, books, reviews, tags, links] = await Promise.all([
    db.sql`select id::text, name, email, rating::text as rating, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as created_at from author`,
    db.sql`select id::text, title, pages, status::text as status, meta::text as meta, author_id::text as author from book`,
    db.sql`select id::text, stars, body, book_id::text as book from review`,
    db.sql`select id::text, name from tag`,
    db.sql`select book_id::text as book, tag_id::text as tag from book_tag`,
  ])
  const actual = {
    author: authors.map((r) => ({ h: h('Author', r.id), name: r.name, email: r.email, rating: decimal(r.rating as string), createdAt: r.created_at })).sort(byHandle),
    book: books
      .map((r) => ({ h: h('Book', r.id), title: r.title, pages: r.pages, status: r.status, meta: r.meta === null ? null : JSON.parse(r.meta as string), author: h('Author', r.author) }))
      .sort(byHandle),
    review: reviews.map((r) => ({ h: h('Review', r.id), stars: r.stars, body: r.body, book: h('Book', r.book) })).sort(byHandle),
    tag: tags.map((r) => ({ h: h('Tag', r.id), name: r.name })).sort(byHandle),
    book_tag: links.map((r) => `${h('Book', r.book)}>${h('Tag', r.tag)}`).sort(),
  }
  const rows = (kind: Kind) =>
    [...model.committed.rows]
      .filter(([, row]) => row.kind === kind)
      .map(([handle, row]) => ({ h: handle, ...Object.fromEntries(FIELDS[kind].map((f) => [f, norm(f, row.v[f])])) }))
      .sort(byHandle)
  const expected = { author: rows('Author'), book: rows('Book'), review: rows('Review'), tag: rows('Tag'), book_tag: [...model.committed.links].sort() }
  expect(actual, 'database rows against the model').toEqual(expected)
}

// ── the property ─────────────────────────────────────────────────────────────────────────────────

async function runSequence(start: Setup, ops: readonly Op[]): Promise<void> {
  counters.sequences++
  await db.sql`truncate book_tag, review, book, tag, author`
  db.queries.length = 0
  const ctx: { model: Model; ems: number; trace: string[] } = { model: new Model(), ems: 0, trace: [] }
  const c: Ctx = Object.assign(ctx, { seg: newSegment(ctx) })
  try {
    await createSetup(c, start)
    for (const op of ops) {
      const ran = await step(c, op)
      tally(`${op.t}${'kind' in op ? ` ${op.kind}` : ''}${ran ? '' : ' (skipped: nothing to pick)'}`)
      if (ran) counters.operations++
    }
    await flushAndCheck(c, { retry: false, fix: 0 })
  } catch (error) {
    const e = error instanceof Error ? error : new Error(String(error))
    e.message += `\n\nOperations as run (A/B/R/T: author, book, review, tag rows of the model; em#n: n-th EntityManager):\n${c.trace.join('\n')}`
    throw e
  }
}

// The same random sequences (same seed) through every executor, each on a fresh schema.
describe.each(ALL_EXECUTORS)('%s', (executor) => {
  beforeAll(async () => {
    db = await testDatabase(bookstore, { name: 'model', max: 2, executor })
    for (const key of Object.keys(counters) as (keyof typeof counters)[]) counters[key] = 0
  })
  afterAll(() => db?.close())

  describe('model-based: random units of work against PostgreSQL and an in-memory model', () => {
    const timeout = 60_000 + RUNS * 6_000
    it(
      `${RUNS} sequences of up to ${LENGTH} operations (seed ${SEED})`,
      async () => {
        const started = performance.now()
        await fc.assert(fc.asyncProperty(setup, fc.noBias(fc.array(operation, { minLength: 1, maxLength: LENGTH, size: 'max' })), runSequence), {
          numRuns: RUNS,
          seed: SEED,
          ...(PATH ? { path: PATH } : {}),
          // Shrinking runs sequences against the database too: stop it in time to report what it has.
          interruptAfterTimeLimit: timeout - 20_000,
          markInterruptAsFailure: true,
        })
        const seconds = ((performance.now() - started) / 1000).toFixed(1)
        console.log(
          `model-based through ${executor}: ${counters.sequences} sequences, ${counters.operations} operations, ${counters.flushes} flushes (${counters.failing} failing) checked in ${seconds} s (seed ${SEED})`,
        )
        if (process.env.MODEL_STATS) console.log([...stats].sort().map(([key, count]) => `${String(count).padStart(6)} ${key}`).join('\n'))
        expect(counters.sequences).toBeGreaterThanOrEqual(RUNS)
      },
      timeout,
    )
  })

  /** The defects this test found, each as its smallest reproducer. */
  describe('model-based: regressions', () => {
    it('add() then remove() of a link on a collection never loaded deletes the link, and remove() then add() inserts it', async () => {
      await db.sql`truncate book_tag, review, book, tag, author`
      const em = db.orm.em()
      const book = em.create('Book', { title: 'b', author: em.create('Author', { name: 'a' }) })
      const [t1, t2] = [em.create('Tag', { name: 'r-t1' }), em.create('Tag', { name: 'r-t2' })]
      book.tags.add(t1)
      await em.flush()

      const em2 = db.orm.em()
      const ref = em2.ref('Book', book.id)
      ref.tags.add(em2.ref('Tag', t1.id))
      ref.tags.remove(em2.ref('Tag', t1.id)) // the link was there: it must go
      ref.tags.remove(em2.ref('Tag', t2.id))
      ref.tags.add(em2.ref('Tag', t2.id)) // the link was not there: it must be made
      await em2.flush()
      expect(await db.sql`select tag_id::int as tag from book_tag`).toEqual([{ tag: t2.id }])
    })

    it('a create() that throws on its many-to-many items leaves nothing for the next flush', async () => {
      await db.sql`truncate book_tag, review, book, tag, author`
      const em = db.orm.em()
      const author = em.create('Author', { name: 'a' })
      expect(() => em.create('Book', { title: 'half-made', author, tags: 'x' as never })).toThrow(InvalidValueError)
      expect(() => em.create('Book', { title: 'half-made', author, tags: [db.orm.em().ref('Tag', 1)] })).toThrow(EntityStateError)
      expect((await em.flush()).inserted).toEqual({ author: 1 })
      expect(await db.sql`select title from book`).toEqual([])
    })

    it('rejects at assignment the JSON and timestamps PostgreSQL cannot store, instead of failing the flush', async () => {
      const em = db.orm.em()
      const book = em.create('Book', { title: 'b', author: em.create('Author', { name: 'a' }) })
      expect(() => (book.meta = { isbn: 'a\0b' })).toThrow(/NUL/)
      expect(() => (book.meta = { tags: ['\ud800'] })).toThrow(/lone surrogate/)
      book.meta = { isbn: '\\u0000 is text here', tags: ['😀'] } // an escaped backslash, and a valid pair
      const author = em.create('Author', { name: 'dated' })
      expect(() => (author.createdAt = new Date('+010000-01-01T00:00:00Z'))).toThrow(InvalidValueError)
      expect(() => (author.createdAt = new Date('-000001-01-01T00:00:00Z'))).toThrow(InvalidValueError)
      author.createdAt = new Date('0001-01-01T00:00:00.000Z')
      await em.flush()
      const [row] = await db.sql`select meta::text as meta from book where id = ${book.id}`
      expect(JSON.parse(row!.meta as string)).toEqual({ isbn: '\\u0000 is text here', tags: ['😀'] })
    })
  })
})
