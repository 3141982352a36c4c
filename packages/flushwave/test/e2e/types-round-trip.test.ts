/**
 * Property-based round trip of every column type, on every executor. Random values (and the edge
 * cases each type has: NaN, -0, ±Infinity, 0001-01-01 and 9999-12-31, times in a DST gap, the
 * empty and a 1 MB bytea, arrays with NULLs, the empty array, text with every character an array
 * literal or a quoted string must escape) are created, flushed in one batch (by COPY, but on
 * PGlite), read back in a new EntityManager and compared; then changed (new values
 * and changes made in place) and compared again; then upserted, which reads every column back
 * through RETURNING.
 *
 * The expected value of a type the server writes in its own form (time, interval, inet, cidr) is
 * what the server makes of the value given, asked with the test's own SQL on the same database:
 * independent of Flushwave's path. Everything else must come back as it went.
 *
 * Each executor gets a database of its own (CREATE DATABASE: citext is an extension, and
 * extensions are per database). With PGBOUNCER_URL set (scripts/pgbouncer.sh), the network
 * executors run through PgBouncer in transaction mode. TYPES_SEED and TYPES_ROWS replay or widen a run.
 */
import { citext } from '@electric-sql/pglite/contrib/citext'
import { PGlite } from '@electric-sql/pglite'
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest'
import { createTablesSql, defineSchema, entity, flushwave, t, type EntityOf, type Flushwave } from '../../src/index.js'
import { ALL_EXECUTORS, openExecutor, type AnyExecutorName } from '../support/executors.js'
import { pgliteSql } from '../support/pglite.js'

const SEED = Number(process.env.TYPES_SEED ?? 20_261_128)
const ROWS = Number(process.env.TYPES_ROWS ?? 40)
const bouncer = process.env.PGBOUNCER_URL

const schema = defineSchema({
  Typed: entity('typed', {
    id: t.id(),
    key: t.text().unique(),
    small: t.smallint().nullable(),
    dbl: t.double().nullable(),
    rl: t.real().nullable(),
    day: t.date().nullable(),
    clock: t.time().nullable(),
    stamp: t.timestamp().nullable(),
    span: t.interval().nullable(),
    bytes: t.bytea().nullable(),
    code: t.varchar(12).nullable(),
    fixed: t.char(3).nullable(),
    ci: t.citext().nullable(),
    ip: t.inet().nullable(),
    net: t.cidr().nullable(),
    texts: t.array(t.text().nullable()).nullable(),
    ints: t.array(t.integer()).nullable(),
    bigs: t.array(t.bigint().nullable()).nullable(),
    dbls: t.array(t.double()).nullable(),
    decimals: t.array(t.numeric()).nullable(),
    stamps: t.array(t.timestamptz().nullable()).nullable(),
    days: t.array(t.date()).nullable(),
    blobs: t.array(t.bytea().nullable()).nullable(),
    docs: t.array(t.jsonb<unknown>().nullable()).nullable(),
    codes: t.array(t.varchar(4)).nullable(),
    ips: t.array(t.inet()).nullable(),
    flags: t.array(t.boolean()).nullable(),
    fixeds: t.array(t.char(3)).nullable(),
    moods: t.array(t.enum('rt_mood', ['calm', 'busy', 'odd "one", {x}'])).nullable(),
  }),
})
type Typed = EntityOf<typeof schema, 'Typed'>
type Values = Omit<{ -readonly [K in keyof Typed as K extends string ? K : never]: Typed[K] }, 'id'>

/** mulberry32: a small seeded generator, so that a failing run can be replayed by its seed. */
function generator(seed: number) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1))
  const pick = <T>(xs: readonly T[]): T => xs[int(0, xs.length - 1)]!
  return { next, int, pick }
}
type Gen = ReturnType<typeof generator>

/** Characters an array literal, a quoted string, JSON or UTF-8 must handle. */
const TRICKY = ['a', 'Z', ' ', '"', '\\', "'", ',', '{', '}', '(', ')', '\n', '\t', 'é', 'ß', '€', '🚀', '𝄞', 'NULL', 'null', '%', '_']
const pad = (n: number, w: number) => String(n).padStart(w, '0')

function text(g: Gen, max: number, ends = true): string {
  let s = ''
  const n = g.int(0, max)
  for (let i = 0; i < n; i++) s += g.pick(TRICKY)
  // Counted in code points, as varchar(n) counts; 'NULL' is four.
  const chars = [...s].slice(0, max)
  while (!ends && chars.at(-1) === ' ') chars.pop()
  return chars.join('')
}

function dateText(days: number): string {
  const d = new Date(days * 86_400_000)
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)}`
}
const DAY_MIN = Date.parse('0001-01-01T00:00:00Z') / 86_400_000
const DAY_MAX = Date.parse('9999-12-31T00:00:00Z') / 86_400_000
const MS_MIN = Date.parse('0001-01-01T00:00:00.000Z')
const MS_MAX = Date.parse('9999-12-31T23:59:59.999Z')

/** A double from random bits: subnormals, huge values and every sign. */
function anyDouble(g: Gen): number {
  const view = new DataView(new ArrayBuffer(8))
  view.setUint32(0, Math.floor(g.next() * 2 ** 32))
  view.setUint32(4, Math.floor(g.next() * 2 ** 32))
  return view.getFloat64(0)
}

const generators: { [K in keyof Values]: (g: Gen) => Values[K] } = {
  key: () => '',
  small: (g) => g.pick([-32768, 32767, 0, g.int(-32768, 32767)]),
  dbl: (g) => g.pick([NaN, -0, 0, Infinity, -Infinity, Number.MIN_VALUE, Number.MAX_VALUE, 0.1, anyDouble(g), anyDouble(g)]),
  // float4 keeps about seven significant digits: six-digit decimals are kept as written.
  rl: (g) => g.pick([NaN, -0, Infinity, -Infinity, 0.1, 3.40282e38, 1e-45, Number((g.next() * 2000 - 1000).toPrecision(g.int(1, 6)))]),
  day: (g) => g.pick(['0001-01-01', '9999-12-31', '2000-02-29', '1970-01-01', '0044-03-15 BC', 'infinity', '-infinity', dateText(g.int(DAY_MIN, DAY_MAX))]),
  clock: (g) => g.pick(['00:00:00', '23:59:59.999999', '24:00:00', `${pad(g.int(0, 23), 2)}:${pad(g.int(0, 59), 2)}:${pad(g.int(0, 59), 2)}${g.next() < 0.5 ? `.${g.int(1, 999_999)}` : ''}`]),
  // Wall-clock times in the DST gap and overlap of Europe and the US: a timestamp without time zone must keep them.
  stamp: (g) => new Date(g.pick([MS_MIN, MS_MAX, Date.parse('2026-03-29T02:30:00.000Z'), Date.parse('2026-10-25T02:30:00.500Z'), Date.parse('2026-03-08T02:15:00.001Z'), g.int(MS_MIN, MS_MAX)])),
  span: (g) => g.pick(['P1Y2M3DT4H5M6.789S', '-1 day 02:00', '0', `${g.int(-100, 100)} years ${g.int(-11, 11)} months ${g.int(-40, 40)} days ${g.int(0, 99)}:${pad(g.int(0, 59), 2)}:${pad(g.int(0, 59), 2)}.${g.int(0, 999_999)}`, '@ 3 days ago']),
  bytes: (g) => g.pick([new Uint8Array(0), new Uint8Array(randomBytesOf(g, g.int(1, 64))), new Uint8Array([0, 92, 120, 255])]),
  code: (g) => text(g, 12),
  fixed: (g) => text(g, 3, false),
  ci: (g) => text(g, 20),
  ip: (g) => g.pick(['127.0.0.1', '::1', '::', '::ffff:10.1.2.3', `${g.int(0, 255)}.${g.int(0, 255)}.${g.int(0, 255)}.${g.int(0, 255)}/${g.int(0, 32)}`, ipv6(g) + (g.next() < 0.5 ? `/${g.int(0, 128)}` : '')]),
  net: (g) => g.pick(['0.0.0.0/0', '10.0.0.0/8', '192.168.4.0/22', '2001:db8::/32', `${g.int(0, 255)}.${g.int(0, 255)}.${g.int(0, 255)}.${g.int(0, 255)}`]),
  texts: (g) => list(g, 6, () => (g.next() < 0.2 ? null : text(g, 8))),
  ints: (g) => list(g, 6, () => g.int(-(2 ** 31), 2 ** 31 - 1)),
  bigs: (g) => list(g, 4, () => (g.next() < 0.2 ? null : g.pick([-(2n ** 63n), 2n ** 63n - 1n, BigInt(g.int(-1e9, 1e9))]))),
  dbls: (g) => list(g, 5, () => g.pick([NaN, -0, Infinity, -Infinity, anyDouble(g)])),
  decimals: (g) => list(g, 4, () => g.pick(['0', '-1.50', '12345678901234567890.000000001', `${g.int(-1e6, 1e6)}.${g.int(0, 999)}`])),
  stamps: (g) => list(g, 4, () => (g.next() < 0.25 ? null : new Date(g.int(MS_MIN, MS_MAX)))),
  days: (g) => list(g, 4, () => g.pick(['0001-01-01', '9999-12-31', dateText(g.int(DAY_MIN, DAY_MAX))])),
  blobs: (g) => list(g, 3, () => (g.next() < 0.25 ? null : new Uint8Array(randomBytesOf(g, g.int(0, 16))))),
  docs: (g) => list(g, 3, () => g.pick([null, 'a "quoted" {text}', { k: [1, 'NULL', { '\\': '"' }] }, [], 0.5])),
  codes: (g) => list(g, 4, () => text(g, 4)),
  ips: (g) => list(g, 3, () => g.pick(['10.0.0.1', '10.0.0.0/8', '::1', ipv6(g)])),
  flags: (g) => list(g, 4, () => g.next() < 0.5),
  // Shorter than 3 too: the server pads char elements, and they must read back unpadded.
  fixeds: (g) => list(g, 4, () => text(g, 3, false)),
  moods: (g) => list(g, 3, () => g.pick(['calm', 'busy', 'odd "one", {x}'] as const)),
}

const COLUMNS = (Object.keys(generators) as (keyof Values)[]).filter((k) => k !== 'key')

function list<T>(g: Gen, max: number, make: () => T): T[] {
  return g.next() < 0.15 ? [] : Array.from({ length: g.int(1, max) }, make)
}

function randomBytesOf(g: Gen, n: number): number[] {
  return Array.from({ length: n }, () => g.int(0, 255))
}

/** Eight groups, none zero: the server writes it as given (no :: to choose), lowercased. */
function ipv6(g: Gen): string {
  return Array.from({ length: 8 }, () => g.int(1, 0xffff).toString(16)).join(':')
}

/** A row's values: each column NULL now and then (the key never). */
function randomValues(g: Gen, key: string): Values {
  const values = { key } as Values
  for (const column of COLUMNS) (values as Record<string, unknown>)[column] = g.next() < 0.12 ? null : generators[column](g)
  return values
}

/** The server's own text of values it rewrites (time, interval, inet, cidr), asked directly. */
async function serverForms(sql: postgres.Sql, rows: readonly Values[]): Promise<Values[]> {
  const pick = (column: keyof Values) => literal(rows.map((r) => r[column] as string | null))
  const [clocks, spans, ips, nets] = await Promise.all([
    sql.unsafe('select x::time::text as v from unnest($1::text[]) with ordinality u(x, o) order by o', [pick('clock')]),
    sql.unsafe('select x::interval::text as v from unnest($1::text[]) with ordinality u(x, o) order by o', [pick('span')]),
    sql.unsafe('select abbrev(x::inet) as v from unnest($1::text[]) with ordinality u(x, o) order by o', [pick('ip')]),
    sql.unsafe('select x::cidr::text as v from unnest($1::text[]) with ordinality u(x, o) order by o', [pick('net')]),
  ])
  const ipLists = await Promise.all(
    rows.map(async (r) => (r.ips === null ? null : (await sql.unsafe('select abbrev(x::inet) as v from unnest($1::text[]) with ordinality u(x, o) order by o', [literal(r.ips)])).map((x) => x.v as string))),
  )
  return rows.map((r, i) => ({ ...r, clock: clocks[i]!.v, span: spans[i]!.v, ip: ips[i]!.v, net: nets[i]!.v, ips: ipLists[i]! }))
}

/** An array literal of texts, written here rather than by a driver (PGlite and postgres.js serialize arrays differently). */
const literal = (xs: readonly (string | null)[]): string => `{${xs.map((x) => (x === null ? 'NULL' : `"${x.replace(/[\\"]/g, '\\$&')}"`)).join(',')}}`

/** Equal as the round trip must keep them: NaN is NaN, -0 is not 0, bytes by content, Dates by time. */
function same(a: unknown, b: unknown): boolean {
  if (typeof a === 'number' && typeof b === 'number') return Object.is(a, b)
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime()
  if (a instanceof Uint8Array && b instanceof Uint8Array) return a.length === b.length && a.every((x, i) => x === b[i])
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => same(x, b[i]))
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object') return JSON.stringify(a) === JSON.stringify(b)
  return a === b
}

const show = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : typeof x === 'number' && !Number.isFinite(x) ? String(x) : Object.is(x, -0) ? '-0' : x instanceof Uint8Array ? `bytes(${x.length}):${Buffer.from(x).toString('hex').slice(0, 40)}` : x))

function compare(step: string, expected: readonly Values[], actual: readonly (Typed | undefined)[]): void {
  const problems: string[] = []
  expected.forEach((want, i) => {
    const got = actual[i]
    if (!got) return void problems.push(`row ${i} (${want.key}) was not read back`)
    for (const column of COLUMNS) {
      if (!same(want[column], got[column])) problems.push(`row ${i} ${column}: wrote ${show(want[column])}, read ${show(got[column])}`)
    }
  })
  if (problems.length > 0) expect.fail(`${step} (TYPES_SEED=${SEED}):\n${problems.slice(0, 12).join('\n')}`)
}

interface Opened {
  readonly orm: Flushwave<typeof schema.defs>
  readonly sql: postgres.Sql
  close(): Promise<void>
}

/** A database of its own with the schema's tables, and a Flushwave on it through `executor`. */
async function open(executor: AnyExecutorName): Promise<Opened> {
  if (executor === 'pglite') {
    const db = await PGlite.create({ extensions: { citext } })
    const sql = pgliteSql(db)
    for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
    return { orm: flushwave({ schema, pglite: db }), sql, close: () => db.close() }
  }
  const url = inject('databaseUrl')
  const name = `fw_types_${randomBytes(4).toString('hex')}`
  const admin = postgres(url, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${name}`)
  const own = (base: string) => Object.assign(new URL(base), { pathname: `/${name}` }).toString()
  const sql = postgres(own(url), { max: 1, onnotice: () => {} })
  for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
  // The first batch's insert goes by COPY (its rows in COPY's text format).
  const opened = openExecutor(executor, own(bouncer ?? url), schema, { ...(bouncer ? { prepare: false } : {}), orm: { copyRows: ROWS } })
  return {
    orm: opened.orm,
    sql,
    close: async () => {
      await opened.close()
      await sql.end()
      await admin.unsafe(`drop database ${name} with (force)`)
      await admin.end()
    },
  }
}

describe.each(ALL_EXECUTORS)('every column type round-trips on %s', (executor) => {
  let db: Opened
  beforeAll(async () => {
    db = await open(executor)
  }, 60_000)
  afterAll(() => db?.close())

  it(`${ROWS} random rows: created, changed, changed in place, upserted, each read back exactly`, async () => {
    const g = generator(SEED)
    const created = Array.from({ length: ROWS }, (_, i) => randomValues(g, `row-${i}`))
    // One row with a 1 MB bytea, one with every column NULL.
    created[0]!.bytes = new Uint8Array(randomBytes(1 << 20))
    for (const column of COLUMNS) (created[1] as Record<string, unknown>)[column] = null

    const em = db.orm.em()
    const entities = created.map((values) => em.create('Typed', values))
    const result = await em.flush()
    expect(result.inserted).toEqual({ typed: ROWS })
    expect(result.copied).toEqual(executor === 'pglite' ? {} : { typed: ROWS })
    const readAll = async () => {
      const all = await db.orm.em().find('Typed', {}, { orderBy: { id: 'asc' } })
      const byKey = new Map(all.map((e) => [e.key, e]))
      return created.map((v) => byKey.get(v.key))
    }
    compare('created, read in a new EntityManager', await serverForms(db.sql, created), await readAll())

    // New values for every column of every row, and changes made in place to arrays and bytes.
    const changed = created.map((v) => randomValues(g, v.key))
    entities.forEach((entity, i) => Object.assign(entity, changed[i]))
    const inPlace = entities.findIndex((e) => e.texts !== null && e.bytes !== null && e.bytes.length > 0)
    if (inPlace >= 0) {
      entities[inPlace]!.texts!.push('pushed "in" {place}')
      entities[inPlace]!.bytes![0] = entities[inPlace]!.bytes![0]! ^ 0xff
      changed[inPlace] = { ...changed[inPlace]!, texts: [...entities[inPlace]!.texts!], bytes: new Uint8Array(entities[inPlace]!.bytes!) }
    }
    await em.flush()
    compare('updated, read in a new EntityManager', await serverForms(db.sql, changed), await readAll())
    // What was read back holds no change: flushing it again writes nothing.
    const reread = db.orm.em()
    await reread.find('Typed', {})
    expect((await reread.flush()).statements).toBe(0)

    // Upserts over the unique key: every column comes back through RETURNING.
    const upserted = created.map((v) => randomValues(g, v.key))
    const em3 = db.orm.em()
    const returned = upserted.map((values) => em3.upsert('Typed', values, { onConflict: 'key' }))
    expect((await em3.flush()).upserted).toEqual({ typed: ROWS })
    const expected = await serverForms(db.sql, upserted)
    compare('upserted, as RETURNING gave it', expected, returned)
    compare('upserted, read in a new EntityManager', expected, await readAll())
  }, 120_000)

  it('a value the schema would refuse, read from the database and left alone, does not fail the flushes of its entity', async () => {
    // ints is int4[] whose elements are not nullable in the schema; another program wrote a NULL.
    const em = db.orm.em()
    const row = em.create('Typed', { key: 'foreign-null', ints: [1] })
    await em.flush()
    await db.sql.unsafe(`update typed set ints = '{1,NULL}' where key = 'foreign-null'`)
    const em2 = db.orm.em()
    const read = await em2.load('Typed', row.id)
    expect(read.ints).toEqual([1, null])
    read.code = 'other'
    expect((await em2.flush()).updated).toEqual({ typed: 1 })
    // Changed in place, it is checked like any value: the NULL is refused before anything is sent.
    read.ints!.push(2)
    await expect(em2.flush()).rejects.toThrow(/element 1 is null/)
  })

  it('finds each row by the value of each column it has, and arrays by contains and overlaps', async () => {
    const em = db.orm.em()
    const rows = await em.find('Typed', {}, { orderBy: { id: 'asc' } })
    // Non-empty bytes and arrays: an empty one is also an object without keys (and once matched as one).
    const usable = (v: unknown) => v !== null && !(typeof v === 'number' && Number.isNaN(v)) && !((v instanceof Uint8Array || Array.isArray(v)) && v.length === 0)
    const misses: string[] = []
    for (const column of ['small', 'dbl', 'rl', 'day', 'clock', 'stamp', 'span', 'bytes', 'code', 'fixed', 'ci', 'ip', 'net', 'texts', 'ints', 'days'] as const) {
      const row = rows.find((r) => usable(r[column]))
      if (!row) return expect.fail(`no row has a ${column} to find by (TYPES_SEED=${SEED}): raise TYPES_ROWS`)
      const found = await em.find('Typed', { [column]: row[column], id: row.id } as never)
      if (found.length !== 1) misses.push(`${column} = ${show(row[column])}`)
    }
    expect(misses).toEqual([])
    const row = rows.find((r) => r.ci !== null && r.ints !== null && r.ints.length > 0)!
    // citext folds case as lower() does: ASCII letters in every locale.
    const upper = row.ci!.replace(/[a-z]/g, (c) => c.toUpperCase())
    expect(await em.count('Typed', { ci: upper, id: row.id }), 'citext ignores case').toBe(1)
    expect(await em.count('Typed', { ints: { contains: [row.ints![0]!] }, id: row.id })).toBe(1)
    expect(await em.count('Typed', { ints: { overlaps: [row.ints![0]!, 7] }, id: row.id })).toBe(1)
    expect(await em.count('Typed', { ints: { containedBy: [...row.ints!] }, id: row.id })).toBe(1)
    expect(await em.count('Typed', { ints: { contains: [...row.ints!, row.ints![0]! + 1] }, id: row.id })).toBe(row.ints!.includes(row.ints![0]! + 1) ? 1 : 0)
  })
})
