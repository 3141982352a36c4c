/**
 * Differential test of `where`. Random condition trees, rooted at each entity of a small schema
 * with every column type and relation kind (a self-reference, two many-to-ones to one table,
 * one-to-manys, a many-to-many), run through Flushwave (`em.find` and `em.count`) against a
 * seeded data set; each answer must equal what an in-memory evaluator of the specification says
 * about the same rows. The evaluator is written from the specification alone (schema/filters.ts,
 * schema/operators.ts and the rules below), not from Flushwave's SQL:
 *
 *   - every key of a `where` must match (AND); `and: []` and `{}` match every row, `or: []` none;
 *     `not: W` matches exactly the rows W does not (so it does match NULLs W's comparison skipped);
 *   - a comparison with a NULL column value is not true: `eq`, `ne`, `gt`…, `between`, `in`, `nin`,
 *     `like`, `ilike`, `notLike`, `contains`, `containedBy`, `hasKey` all fail on NULL; except
 *     `nin: []`, which matches every row, NULLs included (and `in: []` none);
 *   - a many-to-one takes an entity or id (equality on the foreign key), NULL, equality operators on
 *     either, or conditions on the entity it refers to: a NULL reference meets no such conditions;
 *   - a one-to-many or many-to-many takes `some`, `none`, `every` (true on an empty collection),
 *     several of them ANDed;
 *   - numeric compares by value, enums in declared order, timestamps by time, text byte-exactly
 *     (LIKE is case-sensitive; `ilike` folds ASCII letters: patterns given to it are ASCII only);
 *     ordered text comparisons follow the collation, so they are generated on every text column only
 *     when the database's collation is C (code point order), else only on a column of lowercase words;
 *   - jsonb: `eq` is JSON equality (key order aside), `contains` is `@>`, `containedBy` `<@`,
 *     `hasKey` `?`.
 *
 * A dozen hand-picked trees run first, each named after the rule it shows. On a mismatch the
 * failure prints the seed, the tree number (to replay it alone), the tree as JSON, a smaller tree
 * that still fails (greedily shrunk), and both answers.
 *
 * Environment variables:
 *   WHERE_RUNS=5000  random trees per executor (default 1,000)
 *   WHERE_SEED=42    seed (default fixed, so that every run checks the same trees)
 *   WHERE_TREE=17    with WHERE_SEED, runs only that tree
 *   WHERE_REPORT=10  mismatches to collect (each shrunk) before failing (default 3)
 * e.g. `WHERE_RUNS=2000 npx vitest run packages/flushwave/test/e2e/where-differential.test.ts -t pglite`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defineSchema, entity, t, type EntityManager, type EntityOf, type Where } from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

const RUNS = Number(process.env.WHERE_RUNS ?? 1000)
const SEED = Number(process.env.WHERE_SEED ?? 20_260_607)
const ONLY = process.env.WHERE_TREE === undefined ? undefined : Number(process.env.WHERE_TREE)
/** Mismatches collected (each shrunk) before the run stops and fails. */
const MAX_REPORTED = Number(process.env.WHERE_REPORT ?? 3)

type Meta = { tags?: string[]; isbn?: string; n?: number }
const MOODS = ['calm', 'busy', 'away'] as const

const schema = defineSchema({
  Author: entity('author', {
    id: t.id(),
    name: t.text(),
    email: t.text().nullable(),
    rating: t.numeric().nullable(),
    born: t.timestamptz().nullable(),
    active: t.boolean(),
    mood: t.enum('diff_mood', MOODS).nullable(),
    mentor: t.manyToOne('Author').nullable(),
    mentees: t.oneToMany('Author', 'mentor'),
    books: t.oneToMany('Book', 'author'),
    edited: t.oneToMany('Book', 'editor'),
  }),
  Book: entity('book', {
    id: t.id(),
    title: t.text(),
    pages: t.integer().nullable(),
    price: t.bigint().nullable(),
    meta: t.jsonb<Meta>().nullable(),
    author: t.manyToOne('Author'),
    editor: t.manyToOne('Author').nullable(),
    reviews: t.oneToMany('Review', 'book'),
    tags: t.manyToMany('Tag'),
  }),
  Review: entity('review', {
    id: t.id(),
    stars: t.integer(),
    body: t.text().nullable(),
    token: t.uuid().nullable(),
    book: t.manyToOne('Book'),
  }),
  Tag: entity('tag', {
    id: t.id(),
    /** Lowercase ASCII words only: ordered comparisons on it agree with any collation. */
    name: t.text(),
  }),
})

type Defs = typeof schema.defs
type Kind = 'Author' | 'Book' | 'Review' | 'Tag'
type Em = EntityManager<Defs>
type AuthorE = EntityOf<typeof schema, 'Author'>
type BookE = EntityOf<typeof schema, 'Book'>
type TagE = EntityOf<typeof schema, 'Tag'>
/** A where tree as generated: plain objects, checked by the evaluator, passed to Flushwave untyped. */
type W = Record<string, unknown>

// ── the schema, as the evaluator and the generator see it ────────────────────────────────────────

type ColType = 'id' | 'text' | 'integer' | 'bigint' | 'numeric' | 'timestamptz' | 'boolean' | 'enum' | 'jsonb' | 'uuid'
type Prop =
  | { readonly k: 'col'; readonly type: ColType; readonly nullable: boolean; readonly words?: true }
  | { readonly k: 'm2o'; readonly target: Kind; readonly nullable: boolean }
  | { readonly k: 'o2m'; readonly target: Kind; readonly inverse: string }
  | { readonly k: 'm2m'; readonly target: Kind }

const col = (type: ColType, nullable = false, words?: true): Prop => ({ k: 'col', type, nullable, ...(words ? { words } : {}) })
const PROPS: Record<Kind, Record<string, Prop>> = {
  Author: {
    id: col('id'),
    name: col('text'),
    email: col('text', true),
    rating: col('numeric', true),
    born: col('timestamptz', true),
    active: col('boolean'),
    mood: col('enum', true),
    mentor: { k: 'm2o', target: 'Author', nullable: true },
    mentees: { k: 'o2m', target: 'Author', inverse: 'mentor' },
    books: { k: 'o2m', target: 'Book', inverse: 'author' },
    edited: { k: 'o2m', target: 'Book', inverse: 'editor' },
  },
  Book: {
    id: col('id'),
    title: col('text'),
    pages: col('integer', true),
    price: col('bigint', true),
    meta: col('jsonb', true),
    author: { k: 'm2o', target: 'Author', nullable: false },
    editor: { k: 'm2o', target: 'Author', nullable: true },
    reviews: { k: 'o2m', target: 'Review', inverse: 'book' },
    tags: { k: 'm2m', target: 'Tag' },
  },
  Review: {
    id: col('id'),
    stars: col('integer'),
    body: col('text', true),
    token: col('uuid', true),
    book: { k: 'm2o', target: 'Book', nullable: false },
  },
  Tag: { id: col('id'), name: col('text', false, true) },
}
const KINDS: readonly Kind[] = ['Author', 'Book', 'Review', 'Tag']
const EQ_OPS = new Set(['eq', 'ne', 'in', 'nin', 'isNull'])

// ── the in-memory copy of the data ───────────────────────────────────────────────────────────────

interface Row {
  readonly id: number
  /** Core rows have names the hand-picked cases use ('ann', 'b1'); the others `A7`, `B12`, … */
  readonly label: string
  /** Column values by property (NULL as null); a many-to-one holds the referenced id or null. */
  readonly v: Record<string, unknown>
}

class World {
  readonly rows: Record<Kind, Row[]> = { Author: [], Book: [], Review: [], Tag: [] }
  readonly byId: Record<Kind, Map<number, Row>> = { Author: new Map(), Book: new Map(), Review: new Map(), Tag: new Map() }
  /** Book id → its tag ids. */
  readonly links = new Map<number, number[]>()
  private readonly children = new Map<string, Row[]>()

  add(kind: Kind, row: Row): void {
    this.rows[kind].push(row)
    this.byId[kind].set(row.id, row)
  }

  /** The rows a one-to-many or many-to-many property of `row` holds. */
  related(kind: Kind, row: Row, prop: string): Row[] {
    const p = PROPS[kind][prop]!
    if (p.k === 'm2m') return (this.links.get(row.id) ?? []).map((id) => this.byId[p.target].get(id)!)
    if (p.k !== 'o2m') throw new Error(`${kind}.${prop} is no collection`)
    const key = `${kind}.${prop}:${row.id}`
    let found = this.children.get(key)
    if (!found) this.children.set(key, (found = this.rows[p.target].filter((r) => r.v[p.inverse] === row.id)))
    return found
  }

  label(kind: Kind, id: number): string {
    return this.byId[kind].get(id)?.label ?? `#${id}`
  }
}

// ── the evaluator ────────────────────────────────────────────────────────────────────────────────

/** Entity objects of the seeding EntityManager, used as many-to-one values in trees. */
const entityObjects = new WeakSet<object>()
const isEntity = (x: unknown): x is { id: number } => typeof x === 'object' && x !== null && entityObjects.has(x)
const isPlain = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x) && !(x instanceof Date) && !entityObjects.has(x)

/** A decimal string as an integer and a scale ('-1.50' → -150n, 2). */
function decimal(s: string): { m: bigint; scale: number } {
  const match = /^([+-]?)(\d*)(?:\.(\d*))?$/.exec(s)
  if (!match) throw new Error(`not a decimal: ${s}`)
  const frac = match[3] ?? ''
  const m = BigInt(`${match[2] || '0'}${frac}`)
  return { m: match[1] === '-' ? -m : m, scale: frac.length }
}
function compareDecimal(a: string, b: string): number {
  const x = decimal(a)
  const y = decimal(b)
  const scale = Math.max(x.scale, y.scale)
  const xm = x.m * 10n ** BigInt(scale - x.scale)
  const ym = y.m * 10n ** BigInt(scale - y.scale)
  return xm < ym ? -1 : xm > ym ? 1 : 0
}

/** Code point order: what the C collation does with UTF-8 text (its byte order). */
function compareCodePoints(a: string, b: string): number {
  const x = [...a]
  const y = [...b]
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!
    if (d !== 0) return Math.sign(d)
  }
  return Math.sign(x.length - y.length)
}

function compare(type: ColType, a: unknown, b: unknown): number {
  switch (type) {
    case 'id':
    case 'integer':
      return Math.sign((a as number) - (b as number))
    case 'bigint':
      return (a as bigint) < (b as bigint) ? -1 : (a as bigint) > (b as bigint) ? 1 : 0
    case 'numeric':
      return compareDecimal(a as string, b as string)
    case 'timestamptz':
      return Math.sign((a as Date).getTime() - (b as Date).getTime())
    case 'enum':
      return Math.sign(MOODS.indexOf(a as never) - MOODS.indexOf(b as never))
    case 'text':
      return compareCodePoints(a as string, b as string)
    case 'uuid':
      return compareCodePoints((a as string).toLowerCase(), (b as string).toLowerCase())
    default:
      throw new Error(`no order on ${type}`)
  }
}

function jsonEqual(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]))
  }
  if (isPlain(a) || isPlain(b)) {
    if (!isPlain(a) || !isPlain(b)) return false
    const keys = Object.keys(a)
    return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]))
  }
  return a === b
}

/** PostgreSQL's `a @> b` on jsonb (below the top level: structures must match). */
function jsonContains(a: unknown, b: unknown): boolean {
  if (Array.isArray(b)) return Array.isArray(a) && b.every((y) => a.some((x) => jsonContains(x, y)))
  if (isPlain(b)) return isPlain(a) && Object.keys(b).every((k) => Object.hasOwn(a, k) && jsonContains(a[k], b[k]))
  return !Array.isArray(a) && !isPlain(a) && a === b
}

function equal(type: ColType, a: unknown, b: unknown): boolean {
  if (type === 'jsonb') return jsonEqual(a, b)
  if (type === 'numeric' || type === 'timestamptz' || type === 'uuid') return compare(type, a, b) === 0
  return a === b
}

const SYNTAX = new Set([...'^$\\.*+?()[]{}|/'])
/** An SQL LIKE pattern (`\` escapes) as an anchored regular expression over code points. */
function likeRegex(pattern: string): RegExp {
  const cps = [...pattern]
  let re = ''
  for (let i = 0; i < cps.length; i++) {
    let c = cps[i]!
    if (c === '%') re += '.*'
    else if (c === '_') re += '.'
    else {
      if (c === '\\') c = cps[++i] ?? ''
      re += SYNTAX.has(c) ? `\\${c}` : c
    }
  }
  return new RegExp(`^${re}$`, 'su')
}
const asciiLower = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase())

function opMatches(type: ColType, v: unknown, op: string, x: unknown): boolean {
  switch (op) {
    case 'isNull':
      return x ? v === null : v !== null
    case 'in':
      return v !== null && (x as unknown[]).some((y) => equal(type, v, y))
    case 'nin':
      return (x as unknown[]).length === 0 || (v !== null && !(x as unknown[]).some((y) => equal(type, v, y)))
  }
  if (v === null) return false
  switch (op) {
    case 'eq':
      return equal(type, v, x)
    case 'ne':
      return !equal(type, v, x)
    case 'gt':
      return compare(type, v, x) > 0
    case 'gte':
      return compare(type, v, x) >= 0
    case 'lt':
      return compare(type, v, x) < 0
    case 'lte':
      return compare(type, v, x) <= 0
    case 'between': {
      const [low, high] = x as [unknown, unknown]
      return compare(type, v, low) >= 0 && compare(type, v, high) <= 0
    }
    case 'like':
      return likeRegex(x as string).test(v as string)
    case 'notLike':
      return !likeRegex(x as string).test(v as string)
    case 'ilike':
      return likeRegex(asciiLower(x as string)).test(asciiLower(v as string))
    case 'contains':
      return jsonContains(v, x)
    case 'containedBy':
      return jsonContains(x, v)
    case 'hasKey':
      return isPlain(v) ? Object.hasOwn(v, x as string) : Array.isArray(v) && v.includes(x)
  }
  throw new Error(`unknown operator ${op}`)
}

const idOf = (x: unknown): unknown => (isEntity(x) ? x.id : x)

function matches(world: World, kind: Kind, row: Row, where: W): boolean {
  for (const [key, cond] of Object.entries(where)) {
    if (key === 'and') {
      if (!(cond as W[]).every((w) => matches(world, kind, row, w))) return false
    } else if (key === 'or') {
      if (!(cond as W[]).some((w) => matches(world, kind, row, w))) return false
    } else if (key === 'not') {
      if (matches(world, kind, row, cond as W)) return false
    } else if (!propMatches(world, kind, row, key, cond)) return false
  }
  return true
}

function propMatches(world: World, kind: Kind, row: Row, key: string, cond: unknown): boolean {
  const p = PROPS[kind][key]
  if (!p) throw new Error(`${kind} has no property ${key}`)
  const v = row.v[key] ?? null
  if (p.k === 'col') {
    if (cond === null) return v === null
    if (p.type === 'jsonb' || isPlain(cond)) {
      return Object.entries(cond as W).every(([op, x]) => opMatches(p.type, v, op, x))
    }
    return v !== null && equal(p.type, v, cond)
  }
  if (p.k === 'm2o') {
    if (cond === null) return v === null
    if (!isPlain(cond)) return v !== null && v === idOf(cond)
    const keys = Object.keys(cond)
    if (keys.length > 0 && keys.every((k) => EQ_OPS.has(k))) {
      return keys.every((op) => {
        const x = cond[op]
        return opMatches('id', v, op, Array.isArray(x) ? x.map(idOf) : idOf(x))
      })
    }
    // Conditions on the referenced entity: a NULL reference meets none.
    return v !== null && matches(world, p.target, world.byId[p.target].get(v as number)!, cond)
  }
  const related = world.related(kind, row, key)
  return Object.entries(cond as W).every(([q, w]) => {
    if (q === 'some') return related.some((r) => matches(world, p.target, r, w as W))
    if (q === 'none') return !related.some((r) => matches(world, p.target, r, w as W))
    if (q === 'every') return related.every((r) => matches(world, p.target, r, w as W))
    throw new Error(`unknown quantifier ${q}`)
  })
}

function evaluate(world: World, kind: Kind, where: W): number[] {
  return world.rows[kind].filter((row) => matches(world, kind, row, where)).map((row) => row.id).sort((a, b) => a - b)
}

// ── a seeded random source ───────────────────────────────────────────────────────────────────────

class Rng {
  private s: number
  constructor(seed: number) {
    this.s = seed >>> 0
  }
  /** mulberry32 */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0
    let x = this.s
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
  int(n: number): number {
    return Math.floor(this.next() * n)
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!
  }
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items]
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1)
      ;[out[i], out[j]] = [out[j]!, out[i]!]
    }
    return out
  }
  /** A random subset (of at most `max`, maybe none) in random order. */
  some<T>(items: readonly T[], max = items.length): T[] {
    return this.shuffle(items).slice(0, this.int(Math.min(max, items.length) + 1))
  }
}

/** Tree i's seed: each tree can be replayed alone (WHERE_TREE). */
const treeSeed = (seed: number, i: number) => (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) + Math.imul(i + 1, 0xc2b2ae35)) >>> 0

// ── the data set ─────────────────────────────────────────────────────────────────────────────────

const WORDS = ['alpha', 'alp', 'alphabet', 'beta', 'b', 'gamma', 'delta', 'zeta', 'omega', 'a', 'zz']
/** Mixed case, LIKE's special characters, a backslash, non-ASCII letters (none lowercases to ASCII), ties. */
const TEXTS = [
  'Ann', 'ann', 'ANN', 'bob', 'Bob', 'Cléo', 'cléo', 'Ève', 'Zoë 😀', 'Ñandú', 'straße', 'Øre', '日本語',
  '100%', '100% sure', '50_50', 'a_b', 'a%b', 'aXb', 'a\\b', '', ' ', 'the end', 'The End', 'x', 'xx',
]
const EMAILS = ['ann@example.com', 'ANN@EXAMPLE.COM', 'cleo_100%@x.org', 'bob@x.org', 'ève@x.org', 'e\\x@y', '%', '_', '']
const RATINGS = ['4.50', '4.5', '0', '0.00', '-2', '10.000', '3.25', '-0.5', '99999999999999999999.99']
const BORN = ['1980-05-01T00:00:00.000Z', '2001-01-01T00:00:00.001Z', '2001-01-01T00:00:00.000Z', '1969-12-31T23:59:59.999Z', '2024-02-29T12:30:00.000Z'].map(
  (s) => new Date(s),
)
const PAGES = [0, 1, 99, 100, 100, 350, -3, 2147483647]
const PRICES = [0n, -5n, 1999n, 9007199254740992n, 9007199254740993n, -(2n ** 62n)]
const UUIDS = ['018f3c1e-0000-7000-8000-000000000001', '018f3c1e-0000-7000-8000-00000000000a', 'ffffffff-ffff-4fff-bfff-ffffffffffff', '00000000-0000-4000-8000-000000000000']
const METAS: Meta[] = [
  { tags: ['a', 'b'], isbn: '111' },
  {},
  { tags: [] },
  { n: 1 },
  { n: 2, isbn: '222' },
  { tags: ['b'], n: 1 },
  { tags: ['a', 'a', 'Zoë'] },
  { isbn: '111' },
  { tags: ['b', 'a'], isbn: '111', n: 2.5 },
]

interface Seeded {
  readonly world: World
  readonly authors: Map<string, AuthorE>
  readonly books: Map<string, BookE>
  readonly tags: Map<string, TagE>
  /** The database orders text in code point order (collation C): ordered operators on every text column. */
  readonly collationC: boolean
}

/** Writes the data set through Flushwave (one flush) and keeps a copy of every row. */
async function seed(db: TestDatabase<Defs>): Promise<Seeded> {
  const rng = new Rng(7)
  const em = db.orm.em()
  const orNull = <T>(items: readonly T[], p = 0.3): T | null => (rng.chance(p) ? null : rng.pick(items))

  type AuthorInput = { name: string; email: string | null; rating: string | null; born: Date | null; active: boolean; mood: (typeof MOODS)[number] | null; mentor: string | null }
  const authorSpecs: [string, AuthorInput][] = [
    ['ann', { name: 'Ann', email: 'ann@example.com', rating: '4.50', born: BORN[0]!, active: true, mood: 'calm', mentor: null }],
    ['bob', { name: 'bob', email: null, rating: '4.5', born: null, active: false, mood: null, mentor: 'ann' }],
    ['cleo', { name: 'Cléo', email: 'cleo_100%@x.org', rating: null, born: BORN[0]!, active: true, mood: 'busy', mentor: 'bob' }],
    ['dan', { name: 'DAN', email: 'DAN@EXAMPLE.COM', rating: '-2', born: BORN[1]!, active: true, mood: 'away', mentor: null }],
    ['eve', { name: 'Ève', email: 'e\\x@y', rating: '0', born: BORN[3]!, active: false, mood: 'calm', mentor: 'cleo' }],
    ['frank', { name: 'ann', email: '%', rating: '10.000', born: null, active: true, mood: 'busy', mentor: 'dan' }],
  ]
  for (let i = 1; i <= 20; i++) {
    authorSpecs.push([
      `A${i}`,
      {
        name: rng.pick(TEXTS),
        email: orNull(EMAILS, 0.4),
        rating: orNull(RATINGS),
        born: orNull(BORN),
        active: rng.chance(0.5),
        mood: orNull(MOODS),
        mentor: rng.chance(0.5) ? rng.pick(authorSpecs)[0] : null,
      },
    ])
  }
  const authors = new Map<string, AuthorE>()
  for (const [label, a] of authorSpecs) {
    authors.set(label, em.create('Author', { ...a, mentor: a.mentor === null ? null : authors.get(a.mentor)! }))
  }

  const tags = new Map<string, TagE>()
  for (const [i, name] of [...WORDS, 'beta', 'a'].entries()) tags.set(i < WORDS.length ? name : `${name}2`, em.create('Tag', { name }))

  type BookInput = { title: string; pages: number | null; price: bigint | null; meta: Meta | null; author: string; editor: string | null; tags: string[] }
  const bookSpecs: [string, BookInput][] = [
    ['b1', { title: 'The 100% Guide', pages: 100, price: 9007199254740993n, meta: { tags: ['a', 'b'], isbn: '111' }, author: 'ann', editor: null, tags: ['alpha', 'beta'] }],
    ['b2', { title: 'the_underscore', pages: null, price: null, meta: null, author: 'ann', editor: 'bob', tags: [] }],
    ['b3', { title: 'Naïve café', pages: 100, price: -5n, meta: {}, author: 'bob', editor: 'bob', tags: ['beta', 'beta2'] }],
    ['b4', { title: 'under score', pages: 0, price: 0n, meta: { tags: [] }, author: 'cleo', editor: 'dan', tags: [] }],
    ['b5', { title: 'the-underscore', pages: 350, price: 9007199254740992n, meta: { n: 1 }, author: 'frank', editor: null, tags: ['a'] }],
  ]
  const withBooks = [...authorSpecs.map(([l]) => l).filter((l) => l !== 'dan' && !['A3', 'A4', 'A5'].includes(l))]
  for (let i = 1; i <= 35; i++) {
    bookSpecs.push([
      `B${i}`,
      {
        title: rng.pick(TEXTS),
        pages: orNull(PAGES),
        price: orNull(PRICES),
        meta: rng.chance(0.3) ? null : structuredClone(rng.pick(METAS)),
        author: rng.pick(withBooks),
        editor: rng.chance(0.5) ? null : rng.pick(authorSpecs)[0],
        tags: rng.some([...tags.keys()], 3),
      },
    ])
  }
  const books = new Map<string, BookE>()
  for (const [label, b] of bookSpecs) {
    books.set(
      label,
      em.create('Book', {
        title: b.title,
        pages: b.pages,
        price: b.price,
        meta: b.meta === null ? null : structuredClone(b.meta),
        author: authors.get(b.author)!,
        editor: b.editor === null ? null : authors.get(b.editor)!,
        tags: b.tags.map((name) => tags.get(name)!),
      }),
    )
  }

  type ReviewInput = { stars: number; body: string | null; token: string | null; book: string }
  const reviewSpecs: [string, ReviewInput][] = [
    ['r1', { stars: 5, body: 'Great 😀', token: UUIDS[0]!, book: 'b1' }],
    ['r2', { stars: 1, body: null, token: null, book: 'b1' }],
    ['r3', { stars: 3, body: '50_50', token: UUIDS[1]!, book: 'b3' }],
  ]
  // b2 and b4 keep no reviews: empty one-to-manys.
  const reviewable = bookSpecs.map(([l]) => l).filter((l) => l !== 'b2' && l !== 'b4' && l !== 'B1' && l !== 'B2')
  for (let i = 1; i <= 60; i++) {
    reviewSpecs.push([`R${i}`, { stars: rng.int(7) - 1, body: orNull(TEXTS, 0.35), token: orNull(UUIDS, 0.4), book: rng.pick(reviewable) }])
  }
  const reviews = new Map<string, EntityOf<typeof schema, 'Review'>>()
  for (const [label, r] of reviewSpecs) reviews.set(label, em.create('Review', { ...r, book: books.get(r.book)! }))

  await em.flush()

  const world = new World()
  for (const [label, a] of authorSpecs) {
    const e = authors.get(label)!
    entityObjects.add(e)
    world.add('Author', { id: e.id, label, v: { id: e.id, ...a, mentor: a.mentor === null ? null : authors.get(a.mentor)!.id } })
  }
  for (const [label, e] of tags) {
    entityObjects.add(e)
    world.add('Tag', { id: e.id, label, v: { id: e.id, name: e.name } })
  }
  for (const [label, b] of bookSpecs) {
    const e = books.get(label)!
    entityObjects.add(e)
    const { tags: names, ...values } = b
    world.add('Book', { id: e.id, label, v: { id: e.id, ...values, author: authors.get(b.author)!.id, editor: b.editor === null ? null : authors.get(b.editor)!.id } })
    world.links.set(e.id, names.map((name) => tags.get(name)!.id))
  }
  for (const [label, r] of reviewSpecs) {
    const e = reviews.get(label)!
    entityObjects.add(e)
    world.add('Review', { id: e.id, label, v: { id: e.id, ...r, book: books.get(r.book)!.id } })
  }

  const [row] = await db.sql<{ collate: string }[]>`select datcollate as collate from pg_database where datname = current_database()`
  const collationC = ['C', 'POSIX'].includes(row?.collate ?? '')
  return { world, authors, books, tags, collationC }
}

// ── the generator ────────────────────────────────────────────────────────────────────────────────

class TreeMaker {
  constructor(
    private readonly rng: Rng,
    private readonly s: Seeded,
  ) {}

  /** A tree of `budget` levels at most, of one condition or more when `nonEmpty`. */
  where(kind: Kind, budget: number, nonEmpty = false): W {
    const { rng } = this
    const props = Object.keys(PROPS[kind]).filter((key) => budget > 0 || PROPS[kind][key]!.k === 'col' || PROPS[kind][key]!.k === 'm2o')
    const keys = budget > 0 ? [...props, 'and', 'or', 'not'] : props
    const size = rng.pick(nonEmpty ? [1, 1, 1, 2, 2, 3] : [0, 1, 1, 1, 1, 2, 2, 3])
    const w: W = {}
    for (const key of rng.shuffle(keys).slice(0, size)) {
      if (key === 'and' || key === 'or') w[key] = Array.from({ length: rng.pick([0, 1, 1, 2, 2, 2, 3, 3, 3, 3]) }, () => this.where(kind, budget - 1, rng.chance(0.9)))
      else if (key === 'not') w.not = this.where(kind, budget - 1, rng.chance(0.9))
      else w[key] = this.prop(kind, key, budget)
    }
    return w
  }

  private prop(kind: Kind, key: string, budget: number): unknown {
    const { rng } = this
    const p = PROPS[kind][key]!
    if (p.k === 'col') return this.column(kind, key, p)
    if (p.k === 'm2o') {
      const r = rng.next()
      if (r < 0.15) return this.ref(p.target)
      if (r < 0.2) return this.entity(p.target)
      if (r < 0.27 && p.nullable) return null
      if (r < 0.45 || budget === 0) {
        const op = rng.pick(['eq', 'ne', 'in', 'nin', 'isNull'])
        if (op === 'isNull') return { isNull: rng.chance(0.5) }
        if (op === 'in' || op === 'nin') return { [op]: Array.from({ length: rng.pick([0, 1, 2, 3]) }, () => (rng.chance(0.2) ? this.entity(p.target) : this.ref(p.target))) }
        return { [op]: rng.chance(0.2) ? this.entity(p.target) : this.ref(p.target) }
      }
      // Conditions on the referenced entity; never `{}`, which could be read as no operators at all.
      let nested = this.where(p.target, budget - 1)
      while (Object.keys(nested).length === 0) nested = this.where(p.target, budget - 1)
      return nested
    }
    const quantifiers = rng.some(['some', 'none', 'every'], rng.chance(0.8) ? 1 : 3)
    if (quantifiers.length === 0) quantifiers.push(rng.pick(['some', 'none', 'every']))
    return Object.fromEntries(quantifiers.map((q) => [q, this.where(p.target, budget - 1)]))
  }

  private ref(kind: Kind): number {
    const rows = this.s.world.rows[kind]
    return this.rng.chance(0.05) ? rows.at(-1)!.id + 1000 : this.rng.pick(rows).id
  }

  private entity(kind: Kind): object | number {
    const label = this.rng.pick(this.s.world.rows[kind]).label
    const map: Map<string, object> | undefined = kind === 'Author' ? this.s.authors : kind === 'Book' ? this.s.books : kind === 'Tag' ? this.s.tags : undefined
    return map?.get(label) ?? this.ref(kind)
  }

  /** A value of the column: mostly one the data holds, sometimes one it does not. */
  private value(kind: Kind, key: string, type: ColType): unknown {
    const { rng } = this
    const held = this.s.world.rows[kind].map((row) => row.v[key]).filter((v) => v !== null && v !== undefined)
    if (held.length > 0 && rng.chance(0.75)) {
      const v = rng.pick(held)
      // The same decimal written otherwise.
      if (type === 'numeric' && rng.chance(0.3)) return (v as string).includes('.') ? `${v as string}0` : `${v as string}.00`
      if (type === 'timestamptz') return new Date((v as Date).getTime() + rng.pick([0, 0, 0, -1, 1]))
      if (type === 'uuid' && rng.chance(0.3)) return (v as string).toUpperCase()
      return v
    }
    switch (type) {
      case 'id':
        return rng.pick([0, -1, this.s.world.rows[kind].at(-1)!.id + 1])
      case 'integer':
        return rng.pick([-1, 0, 1, 2, 5, 99, 101, -2147483648, 2147483647])
      case 'bigint':
        return rng.pick([1n, -6n, 9007199254740994n, 2n ** 62n, -(2n ** 63n)])
      case 'numeric':
        return rng.pick(['4.49', '4.500001', '-2.0', '0.000', '100', '-0.001', '10'])
      case 'timestamptz':
        return rng.pick([new Date(0), new Date('1980-05-01T00:00:00.000Z'), new Date('2100-01-01T00:00:00.000Z'), new Date('1900-06-15T08:00:00.000Z')])
      case 'boolean':
        return rng.chance(0.5)
      case 'enum':
        return rng.pick(MOODS)
      case 'uuid':
        return rng.pick(['00000000-0000-0000-0000-000000000000', '018f3c1e-0000-7000-8000-000000000005', 'FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFE'])
      case 'text':
        return PROPS[kind][key]!.k === 'col' && (PROPS[kind][key] as { words?: true }).words
          ? rng.pick(['alphab', 'al', 'be', 'c', 'zzz', 'omegas'])
          : rng.pick(['ANN', 'annie', 'Cleo', 'cléo', '100', '%', '_', 'a_', 'Zoë', 'é', 'the End', 'z'])
      case 'jsonb':
        return this.doc()
    }
  }

  private column(kind: Kind, key: string, p: Extract<Prop, { k: 'col' }>): unknown {
    const { rng } = this
    if (p.type === 'jsonb') return this.json(kind, key)
    const r = rng.next()
    if (r < 0.2) return this.value(kind, key, p.type)
    if (r < 0.27 && p.nullable) return null
    const ordered = p.type !== 'boolean' && (p.type !== 'text' || p.words === true || this.s.collationC)
    const ops = ['eq', 'ne', 'in', 'nin', 'isNull']
    if (ordered) ops.push('gt', 'gte', 'lt', 'lte', 'between', 'between')
    if (p.type === 'text') ops.push('like', 'like', 'ilike', 'ilike', 'notLike', 'notLike')
    const out: W = {}
    for (const op of rng.some(ops, rng.chance(0.8) ? 1 : 2)) out[op] = this.operand(kind, key, p.type, op)
    if (Object.keys(out).length === 0) {
      const op = rng.pick(ops)
      out[op] = this.operand(kind, key, p.type, op)
    }
    return out
  }

  private operand(kind: Kind, key: string, type: ColType, op: string): unknown {
    const { rng } = this
    switch (op) {
      case 'isNull':
        return rng.chance(0.5)
      case 'in':
      case 'nin':
        return Array.from({ length: rng.pick([0, 1, 2, 2, 3]) }, () => this.value(kind, key, type))
      case 'between': {
        const a = this.value(kind, key, type)
        const b = this.value(kind, key, type)
        return rng.chance(0.8) && compare(type, a, b) > 0 ? [b, a] : [a, b]
      }
      case 'like':
      case 'notLike':
        return this.pattern(this.value(kind, key, type) as string, false)
      case 'ilike':
        return this.pattern(this.value(kind, key, type) as string, true)
      default:
        return this.value(kind, key, type)
    }
  }

  /** A LIKE pattern, mostly made from a value: prefix, suffix, infix, some characters as `_`. ASCII only for ilike. */
  private pattern(from: string, ascii: boolean): string {
    const { rng } = this
    if (rng.chance(0.1)) return rng.pick(['%', '_', '', '%\\%%', '%\\_%', '%_%', '__', '%\\\\%', 'a\\%b', 'a_b'])
    const cps = [...from]
    const lit = (c: string) => {
      if (ascii && !/^[\x20-\x7e]$/.test(c)) return '_'
      if (c === '%' || c === '_' || c === '\\') return `\\${c}`
      if (ascii && /[a-z]/i.test(c) && rng.chance(0.5)) return c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()
      return c
    }
    const i = rng.int(cps.length + 1)
    const j = i + rng.int(cps.length - i + 1)
    const part = (list: string[]) => list.map((c) => (rng.chance(0.15) ? '_' : lit(c))).join('')
    switch (rng.int(5)) {
      case 0:
        return part(cps)
      case 1:
        return `${part(cps.slice(0, i))}%`
      case 2:
        return `%${part(cps.slice(i))}`
      case 3:
        return `%${part(cps.slice(i, j))}%`
      default:
        return `${part(cps.slice(0, i))}%${part(cps.slice(j))}`
    }
  }

  private json(kind: Kind, key: string): W {
    const { rng } = this
    const held = this.s.world.rows[kind].map((row) => row.v[key]).filter((v): v is Meta => v !== null)
    const base = () => structuredClone(rng.pick(held))
    switch (rng.pick(['eq', 'ne', 'isNull', 'contains', 'contains', 'containedBy', 'containedBy', 'hasKey', 'hasKey'])) {
      case 'eq':
        return { eq: rng.chance(0.7) ? shuffleKeys(rng, base()) : this.doc() }
      case 'ne':
        return { ne: rng.chance(0.7) ? shuffleKeys(rng, base()) : this.doc() }
      case 'isNull':
        return { isNull: rng.chance(0.5) }
      case 'contains': {
        if (rng.chance(0.3)) return { contains: this.doc() }
        const d = base() as W
        const sub: W = {}
        for (const k of rng.some(Object.keys(d))) sub[k] = k === 'tags' ? rng.some(d.tags as string[]).concat(rng.chance(0.1) ? ['a'] : []) : d[k]
        return { contains: sub }
      }
      case 'containedBy': {
        if (rng.chance(0.3)) return { containedBy: this.doc() }
        const d = base() as W
        if (rng.chance(0.6)) d.tags = [...((d.tags as string[] | undefined) ?? []), ...rng.some(['a', 'b', 'c', 'Zoë'], 2)]
        if (rng.chance(0.4)) d.isbn ??= '111'
        if (rng.chance(0.4)) d.n ??= rng.pick([1, 2])
        if (rng.chance(0.2)) d.extra = true
        return { containedBy: d }
      }
      default:
        return { hasKey: rng.pick(['tags', 'isbn', 'n', 'extra', 'a', 'Tags']) }
    }
  }

  private doc(): W {
    const { rng } = this
    const d: W = {}
    if (rng.chance(0.5)) d.tags = rng.some(['a', 'b', 'c', 'Zoë'], 3)
    if (rng.chance(0.4)) d.isbn = rng.pick(['111', '222', '333'])
    if (rng.chance(0.4)) d.n = rng.pick([1, 2, 2.5, 3])
    return d
  }
}

function shuffleKeys(rng: Rng, d: Meta): Meta {
  const keys = Object.keys(d)
  return Object.fromEntries(rng.some(keys, keys.length).concat(keys).filter((k, i, all) => all.indexOf(k) === i).map((k) => [k, d[k as keyof Meta]]))
}

// ── checking one tree ────────────────────────────────────────────────────────────────────────────

/** A tree as JSON: bigints as `"123n"`, Dates as ISO text, entity objects as `{"$entity": id}`. */
function show(where: unknown): string {
  return JSON.stringify(where, function (this: Record<string, unknown>, key, value: unknown) {
    const raw = key === '' ? where : this[key]
    if (typeof raw === 'bigint') return `${raw}n`
    if (raw instanceof Date) return `Date(${raw.toISOString()})`
    if (isEntity(raw)) return { $entity: raw.id }
    return value
  })
}

interface Outcome {
  readonly expected: number[]
  readonly found: number[] | string
  readonly counted: number | string
}

async function check(db: TestDatabase<Defs>, world: World, kind: Kind, where: W): Promise<Outcome | undefined> {
  const expected = evaluate(world, kind, where)
  const fail = (e: unknown) => `error: ${e instanceof Error ? `${e.constructor.name}: ${e.message}` : String(e)}`
  let found: number[] | string
  let counted: number | string
  try {
    const em: Em = db.orm.em()
    found = (await em.find(kind, where as never)).map((e) => (e as { id: number }).id).sort((a, b) => a - b)
  } catch (e) {
    found = fail(e)
  }
  try {
    const em: Em = db.orm.em()
    counted = await em.count(kind, where as never)
  } catch (e) {
    counted = fail(e)
  }
  const same = Array.isArray(found) && found.length === expected.length && found.every((id, i) => id === expected[i]) && counted === expected.length
  return same ? undefined : { expected, found, counted }
}

/** Smaller trees for a failing one: a key dropped, an and/or element dropped, a node replaced by a child. */
function* shrinks(kind: Kind, w: W): Generator<W> {
  const keys = Object.keys(w)
  for (const key of keys) {
    const { [key]: _, ...rest } = w
    yield rest
  }
  for (const key of keys) {
    const value = w[key]
    if (key === 'and' || key === 'or') {
      const list = value as W[]
      for (let i = 0; i < list.length; i++) {
        yield list[i]!
        yield { ...w, [key]: list.filter((_, j) => j !== i) }
        for (const smaller of shrinks(kind, list[i]!)) yield { ...w, [key]: list.map((x, j) => (j === i ? smaller : x)) }
      }
    } else if (key === 'not') {
      yield value as W
      for (const smaller of shrinks(kind, value as W)) yield { ...w, not: smaller }
    } else {
      const p = PROPS[kind][key]!
      if (p.k === 'm2o' && isPlain(value) && !Object.keys(value).every((k) => EQ_OPS.has(k))) {
        for (const smaller of shrinks(p.target, value)) if (Object.keys(smaller).length > 0) yield { ...w, [key]: smaller }
      } else if (p.k === 'o2m' || p.k === 'm2m') {
        const qs = value as W
        for (const q of Object.keys(qs)) {
          if (Object.keys(qs).length > 1) {
            const { [q]: _, ...others } = qs
            yield { ...w, [key]: others }
          }
          for (const smaller of shrinks(p.target, qs[q] as W)) yield { ...w, [key]: { ...qs, [q]: smaller } }
        }
      }
    }
  }
}

async function shrink(db: TestDatabase<Defs>, world: World, kind: Kind, where: W, outcome: Outcome): Promise<{ where: W; outcome: Outcome }> {
  let best = { where, outcome }
  let budget = 300
  for (let progress = true; progress && budget > 0; ) {
    progress = false
    for (const candidate of shrinks(kind, best.where)) {
      if (--budget < 0) break
      const failed = await check(db, world, kind, candidate)
      if (failed) {
        best = { where: candidate, outcome: failed }
        progress = true
        break
      }
    }
  }
  return best
}

function report(world: World, kind: Kind, where: W, o: Outcome, header: string): string {
  const labels = (ids: number[] | string) => (Array.isArray(ids) ? `[${ids.join(', ')}] (${ids.map((id) => world.label(kind, id)).join(' ')})` : ids)
  return [
    header,
    `  ${kind} where ${show(where)}`,
    `  expected ids: ${labels(o.expected)}`,
    `  em.find ids:  ${labels(o.found)}`,
    `  em.count:     ${o.counted} (expected ${o.expected.length})`,
  ].join('\n')
}

// ── hand-picked trees ────────────────────────────────────────────────────────────────────────────

interface Case {
  readonly name: string
  readonly root: Kind
  readonly where: (s: Seeded) => W
  /** Labels of rows the answer must hold / must not hold: the rule the case shows. */
  readonly has?: readonly string[]
  readonly lacks?: readonly string[]
  /** 'all' or 'none' of the root's rows. */
  readonly size?: 'all' | 'none'
}

/** Cases rooted at K (curried, so that K is fixed before the tree is typed). */
const on =
  <K extends Kind>(root: K) =>
  (name: string, where: (s: Seeded) => Where<Defs, K>, expect: Omit<Case, 'name' | 'root' | 'where'>): Case => ({ name, root, where: where as unknown as (s: Seeded) => W, ...expect })
const author = on('Author')
const book = on('Book')
const review = on('Review')

const CASES: readonly Case[] = [
  book('not over NULL matches the NULLs', () => ({ not: { pages: 100 } }), { has: ['b2', 'b4'], lacks: ['b1', 'b3'] }),
  book('ne does not match NULL', () => ({ pages: { ne: 100 } }), { has: ['b4', 'b5'], lacks: ['b1', 'b2'] }),
  book('nin: [] matches every row, NULLs included', () => ({ pages: { nin: [] } }), { size: 'all' }),
  book('in: [] matches no row', () => ({ price: { in: [] } }), { size: 'none' }),
  book('nin with values does not match NULL', () => ({ pages: { nin: [0] } }), { has: ['b1', 'b5'], lacks: ['b2', 'b4'] }),
  author('or: [] matches no row', () => ({ or: [] }), { size: 'none' }),
  author('and: [] and {} match every row', () => ({ and: [{}, { and: [] }] }), { size: 'all' }),
  author('every holds on an empty collection', () => ({ books: { every: { title: 'no such title' } } }), { has: ['dan'], lacks: ['ann', 'bob'] }),
  author('none: {} is an empty collection', () => ({ books: { none: {} }, edited: { some: {} } }), { has: ['dan'], lacks: ['ann', 'bob'] }),
  book('some over a many-to-many', () => ({ tags: { some: { name: { in: ['alpha', 'a'] } } } }), { has: ['b1', 'b5'], lacks: ['b2', 'b3', 'b4'] }),
  book('a NULL reference meets no nested conditions', () => ({ editor: { name: { like: '%' } } }), { has: ['b2', 'b3', 'b4'], lacks: ['b1', 'b5'] }),
  book('a NULL reference meets no nested conditions, not even ones true of NULL columns', () => ({ editor: { mood: null } }), { has: ['b2', 'b3'], lacks: ['b1', 'b4', 'b5'] }),
  book('every, through a NULL reference, is not true', () => ({ editor: { edited: { every: {} } } }), { has: ['b2', 'b4'], lacks: ['b1', 'b5'] }),
  book('not over nested conditions matches the NULL references', () => ({ not: { editor: { name: 'bob' } } }), { has: ['b1', 'b4', 'b5'], lacks: ['b2', 'b3'] }),
  review('nested many-to-ones three deep', () => ({ book: { author: { mentor: { name: 'Ann' } } } }), { has: ['r3'], lacks: ['r1', 'r2'] }),
  book('two many-to-ones to one table', () => ({ author: { name: 'bob' }, editor: { name: 'bob' } }), { has: ['b3'], lacks: ['b2'] }),
  author('an or inside some is about one related row', () => ({ books: { some: { or: [{ title: 'The 100% Guide' }, { title: 'the-underscore' }] } } }), { has: ['ann', 'frank'], lacks: ['bob', 'dan'] }),
  book('an or inside none is about one related row', () => ({ reviews: { none: { or: [{ stars: 5 }, { stars: 1 }] } } }), { has: ['b2', 'b4'], lacks: ['b1'] }),
  author('a self-reference, two levels of some', () => ({ mentees: { some: { mentees: { some: {} } } } }), { has: ['ann', 'bob'], lacks: ['A20'] }),
  book('LIKE: escaped % in the data', () => ({ title: { like: '%\\%%' } }), { has: ['b1'], lacks: ['b2', 'b3'] }),
  book('LIKE: _ is one character, \\_ an underscore', () => ({ or: [{ title: { like: 'the\\_underscore' } }, { title: { like: 'THE_UNDERSCORE' } }] }), { has: ['b2'], lacks: ['b5'] }),
  book('LIKE: _ unescaped matches any one character', () => ({ title: { like: 'the_underscore' } }), { has: ['b2', 'b5'], lacks: ['b4'] }),
  author('ilike ignores case, like does not', () => ({ name: { ilike: 'ANN' }, not: { name: { like: 'Ann' } } }), { has: ['frank'], lacks: ['ann', 'bob'] }),
  author('notLike does not match NULL', () => ({ email: { notLike: '%@%' } }), { has: ['frank'], lacks: ['ann', 'bob'] }),
  author('numeric compares by value', () => ({ rating: '4.5', or: [{ rating: { between: ['4.500', '4.5'] } }] }), { has: ['ann', 'bob'], lacks: ['cleo', 'dan'] }),
  author('enums compare in declared order', () => ({ mood: { gt: 'calm' } }), { has: ['cleo', 'dan', 'frank'], lacks: ['ann', 'bob', 'eve'] }),
  author('timestamps compare by time', () => ({ born: { lt: new Date(0) } }), { has: ['eve'], lacks: ['ann', 'bob', 'dan'] }),
  book('bigint beyond 2^53', () => ({ price: 9007199254740993n }), { has: ['b1'], lacks: ['b5'] }),
  book('jsonb eq ignores key order', () => ({ meta: { eq: { isbn: '111', tags: ['a', 'b'] } } }), { has: ['b1'], lacks: ['b2', 'b3'] }),
  book('jsonb contains and hasKey', () => ({ meta: { contains: { tags: ['a'] } }, or: [{ meta: { hasKey: 'isbn' } }] }), { has: ['b1'], lacks: ['b2', 'b3', 'b4'] }),
  book('jsonb hasKey on an empty array and an empty object', () => ({ meta: { hasKey: 'tags' } }), { has: ['b1', 'b4'], lacks: ['b2', 'b3', 'b5'] }),
  book('many-to-one by entity, by id, nin over NULL', (s) => ({ author: s.authors.get('ann')!, editor: { nin: [s.authors.get('dan')!.id] } }), { has: ['b2'], lacks: ['b1', 'b3', 'b4'] }),
  book('many-to-one null and isNull', () => ({ editor: null, or: [{ editor: { isNull: true } }] }), { has: ['b1', 'b5'], lacks: ['b2'] }),
]

// ── the suites ───────────────────────────────────────────────────────────────────────────────────

const ROOTS: readonly Kind[] = ['Author', 'Author', 'Author', 'Book', 'Book', 'Book', 'Review', 'Review', 'Tag']

/** Random tree i of the seed: its root entity and conditions. */
function treeOf(s: Seeded, i: number): { kind: Kind; where: W } {
  const rng = new Rng(treeSeed(SEED, i))
  const kind = rng.pick(ROOTS)
  return { kind, where: new TreeMaker(rng, s).where(kind, rng.pick([1, 2, 2, 3, 3, 4]), true) }
}

describe.each(ALL_EXECUTORS)('where, differentially, on %s', (executor) => {
  let db: TestDatabase<Defs>
  let s: Seeded

  beforeAll(async () => {
    db = await testDatabase(schema, { name: 'wherediff', executor })
    s = await seed(db)
  })
  afterAll(() => db?.close())

  it.each(CASES.map((k) => [k.name, k] as const))('%s', async (_, k) => {
    const where = k.where(s)
    const all = s.world.rows[k.root]
    const expected = evaluate(s.world, k.root, where)
    const labels = expected.map((id) => s.world.label(k.root, id))
    // The evaluator says what the case means…
    for (const label of k.has ?? []) expect(labels, `evaluator: ${label}`).toContain(label)
    for (const label of k.lacks ?? []) expect(labels, `evaluator: ${label}`).not.toContain(label)
    if (k.size === 'all') expect(expected).toHaveLength(all.length)
    if (k.size === 'none') expect(expected).toEqual([])
    // …and Flushwave agrees.
    const failed = await check(db, s.world, k.root, where)
    if (failed) expect.fail(report(s.world, k.root, where, failed, `${executor}: "${k.name}" disagrees`))
  })

  it(`${RUNS} random trees agree with the evaluator`, { timeout: 600_000 }, async () => {
    console.log(`where-differential (${executor}): WHERE_SEED=${SEED}, ${ONLY === undefined ? `${RUNS} trees` : `tree ${ONLY}`}, text order ${s.collationC ? 'C' : 'words only'}`)
    const failures: string[] = []
    for (let i = ONLY ?? 0; i < (ONLY === undefined ? RUNS : ONLY + 1); i++) {
      const { kind, where } = treeOf(s, i)
      const failed = await check(db, s.world, kind, where)
      if (!failed) continue
      const small = await shrink(db, s.world, kind, where, failed)
      failures.push(
        [
          report(s.world, kind, where, failed, `tree ${i} (WHERE_SEED=${SEED} WHERE_TREE=${i}) on ${executor}:`),
          report(s.world, kind, small.where, small.outcome, `shrunk to:`),
        ].join('\n'),
      )
      if (failures.length >= MAX_REPORTED) break
    }
    if (failures.length > 0) expect.fail(`${failures.length} tree(s) disagree with the evaluator\n\n${failures.join('\n\n')}`)
  })

  it('the random trees are not trivial: answers vary', () => {
    // Over the seed's first 200 trees (evaluated in memory only), answers must be neither mostly
    // empty nor often everything: else the comparison above would prove little.
    let empty = 0
    let full = 0
    const n = 200
    for (let i = 0; i < n; i++) {
      const { kind, where } = treeOf(s, i)
      const size = evaluate(s.world, kind, where).length
      if (size === 0) empty++
      if (size === s.world.rows[kind].length) full++
    }
    expect(empty / n).toBeLessThan(0.5)
    expect(full / n).toBeLessThan(0.25)
  })
})
