import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  defineSchema,
  entity,
  EntityStateError,
  FlushwaveError,
  ForeignKeyViolationError,
  InvalidCursorError,
  InvalidValueError,
  SchemaError,
  t,
  ValidationError,
  type EntityManager,
  type EntityOf,
} from '../../src/index.js'
import { testDatabase, type TestDatabase } from '../support/database.js'
import { ALL_EXECUTORS } from '../support/executors.js'

/**
 * Bad input, case by case, against a real PostgreSQL. Every case ends one of three ways:
 * - rejected: a typed Flushwave error, thrown before any statement (a flush may take ids from the
 *   sequence first, which writes no table), and the EntityManager then flushes its valid pending
 *   data with exactly the expected rows;
 * - stored verbatim: read back equal through a fresh EntityManager and through raw SQL, on insert
 *   and on update (text also found by equality, `in` and `ne`, literally);
 * - refused by the server: only for what nothing but the database can know (a row deleted since),
 *   a typed FlushError and nothing committed.
 * Untyped callers (JavaScript, request bodies) can pass anything, hence the `as never` casts.
 */

const schema = defineSchema({
  Owner: entity('owner', {
    id: t.id(),
    name: t.text().length({ max: 40 }),
    things: t.oneToMany('Thing', 'owner'),
  }),
  Thing: entity('thing', {
    id: t.id(),
    title: t.text(),
    note: t.text().nullable(),
    short: t.text().length({ max: 5 }).nullable(),
    count: t.integer().default(0),
    big: t.bigint().nullable(),
    amount: t.numeric().nullable(),
    rating: t.numeric().range({ min: 0, max: 5 }).nullable(),
    flag: t.boolean().default(false),
    at: t.timestamptz().nullable(),
    doc: t.jsonb<unknown>().nullable(),
    ref: t.uuid().nullable(),
    mood: t.enum('mood', ['calm', 'busy']).nullable(),
    small: t.smallint().nullable(),
    dbl: t.double().nullable(),
    rl: t.real().nullable(),
    day: t.date().nullable(),
    clock: t.time().nullable(),
    stamp: t.timestamp().nullable(),
    span: t.interval().nullable(),
    bytes: t.bytea().nullable(),
    code: t.varchar(5).nullable(),
    fixed: t.char(2).nullable(),
    ip: t.inet().nullable(),
    net: t.cidr().nullable(),
    list: t.array(t.integer()).nullable(),
    labels: t.array(t.text().nullable()).nullable(),
    owner: t.manyToOne('Owner'),
    tags: t.manyToMany('Tag'),
  }),
  Tag: entity('tag', { id: t.uuidId(), name: t.text() }),
  Code: entity('code', { id: t.providedId(), value: t.text() }),
})
type D = typeof schema.defs
type Em = EntityManager<D>
type Owner = EntityOf<typeof schema, 'Owner'>
type Thing = EntityOf<typeof schema, 'Thing'>
type Tag = EntityOf<typeof schema, 'Tag'>

const TABLES = ['owner', 'thing', 'tag', 'code', 'thing_tag'] as const
type Counts = Record<(typeof TABLES)[number], number>

let db: TestDatabase<D>
/** Rows every case starts from. */
const ids = { home: 0, thing: 0, target: 0, tag: '' }
const FIXTURE_AT = new Date('2020-02-02T02:02:02.020Z')
let tried = 0

async function counts(): Promise<Counts> {
  const [row] = await db.sql.unsafe(`select ${TABLES.map((name) => `(select count(*)::int from "${name}") as "${name}"`).join(', ')}`)
  return row as unknown as Counts
}

function plus(base: Counts, delta: Partial<Counts>): Counts {
  const out = { ...base }
  for (const [name, n] of Object.entries(delta)) out[name as keyof Counts] += n
  return out
}

async function capture(fn: () => unknown): Promise<unknown> {
  try {
    await fn()
  } catch (error) {
    return error
  }
  return undefined
}

/** Statements as "phase: text" (never the parameters, which may be megabytes). */
const described = (from: number) => db.queries.slice(from).map((q) => `${q.phase}: ${q.text}`)

// ---------------------------------------------------------------------------------------------
// Rejected cases
// ---------------------------------------------------------------------------------------------

/** What each rejected case gets: one EntityManager with loaded entities, another one, and a deleted row. */
interface Fx {
  readonly em: Em
  readonly other: Em
  /** Loaded in `em`. */
  readonly home: Owner
  readonly thing: Thing
  readonly tag: Tag
  /** The same rows, loaded in `other`. */
  readonly foreignOwner: Owner
  readonly foreignTag: Tag
  readonly foreignThing: Thing
  /** Removed from `em`, and that removal flushed. */
  readonly gone: Owner
  readonly goneTag: Tag
  /** Valid data for a new Thing in `em`. */
  valid(): { title: string; owner: Owner }
  /** An entity the case made (or a row it prepared), for its repair. */
  made: Record<string, unknown> | undefined
}

type ErrorClass = abstract new (...args: never[]) => Error

interface Rejected {
  readonly name: string
  /** Runs before anything is measured: may load, create and flush. */
  readonly prepare?: (fx: Fx) => unknown
  /** The bad input: must throw (or reject) `rejects`. */
  readonly act: (fx: Fx) => unknown
  readonly rejects: ErrorClass
  readonly message?: RegExp
  /** The act calls flush(): ids may be taken from the sequence (no table written) before it fails. */
  readonly atFlush?: boolean
  /** Only the database can tell: the write is sent, refused, and rolled back. */
  readonly server?: boolean
  /** Makes the EntityManager's pending changes valid again. */
  readonly repair?: (fx: Fx) => void
  /** More checks once it failed. */
  readonly check?: (fx: Fx) => void
  /** Net rows of the whole case besides the owner every case adds (prepare and repaired flush included). */
  readonly delta?: Partial<Counts>
}

async function fixtures(): Promise<Fx> {
  const em = db.orm.em()
  const other = db.orm.em()
  const [home, thing, tag, foreignOwner, foreignTag, foreignThing] = await Promise.all([
    em.load('Owner', ids.home),
    em.load('Thing', ids.thing),
    em.load('Tag', ids.tag),
    other.load('Owner', ids.home),
    other.load('Tag', ids.tag),
    other.load('Thing', ids.thing),
  ])
  const gone = em.create('Owner', { name: 'gone' })
  const goneTag = em.create('Tag', { name: 'gone' })
  await em.flush()
  em.remove(gone)
  em.remove(goneTag)
  await em.flush()
  return { em, other, home, thing, tag, foreignOwner, foreignTag, foreignThing, gone, goneTag, valid: () => ({ title: 'valid', owner: home }), made: undefined }
}

async function runRejected(c: Rejected): Promise<void> {
  tried++
  const start = await counts()
  const fx = await fixtures()
  await c.prepare?.(fx)
  // Valid pending data the rejection must neither write nor lose.
  const keep = fx.em.create('Owner', { name: 'keep' })
  const before = await counts()
  const sent = db.queries.length

  const error = await capture(() => c.act(fx))
  expect(error, 'the bad input was accepted').toBeDefined()
  expect(error, String(error)).toBeInstanceOf(c.rejects)
  expect(error, 'not a typed Flushwave error').toBeInstanceOf(FlushwaveError)
  if (c.message) expect((error as Error).message).toMatch(c.message)
  if (c.server) {
    expect(described(sent).some((q) => q.startsWith('write:')), 'only the server could refuse this').toBe(true)
  } else if (c.atFlush) {
    expect(described(sent).filter((q) => !q.startsWith('allocate:')), 'sent before it failed').toEqual([])
  } else {
    expect(described(sent), 'sent before it failed').toEqual([])
  }
  expect(await counts(), 'rows changed by a rejected input').toEqual(before)
  c.check?.(fx)

  // The EntityManager is still usable, and its flush writes exactly the valid data.
  c.repair?.(fx)
  await fx.em.flush()
  expect(await counts()).toEqual(plus(start, { ...c.delta, owner: 1 + (c.delta?.owner ?? 0) }))
  expect(fx.em.idOf(keep)).toBeDefined()
  expect((await db.sql`select name from owner where id = ${fx.em.idOf(keep)!}`).map((r) => r.name as unknown)).toEqual(['keep'])
}

const set = (entity: object, prop: string, value: unknown) => {
  ;(entity as Record<string, unknown>)[prop] = value
}

/** Values a Thing property cannot hold; each is tried in create(), in an assignment and (`where`) in find(). */
const badValues: readonly (readonly [prop: string, what: string, value: () => unknown, where?: false])[] = [
  ['title', 'a number for text', () => 42],
  ['title', 'a String object for text', () => new String('x')],
  ['title', 'an array for text', () => ['a']],
  ['title', 'a NUL byte in text', () => 'a\0b'],
  ['title', 'a lone surrogate in text', () => 'a\ud800b'],
  ['note', 'a boolean for nullable text', () => true],
  ['count', 'a numeric string for integer', () => '42'],
  ['count', 'a fraction for integer', () => 1.5],
  ['count', 'NaN for integer', () => NaN],
  ['count', 'Infinity for integer', () => Infinity],
  ['count', '-Infinity for integer', () => -Infinity],
  ['count', '2^31 (beyond int4)', () => 2 ** 31],
  ['count', '-2^31-1 (beyond int4)', () => -(2 ** 31) - 1],
  ['count', '2^53+2 (beyond int4)', () => 2 ** 53 + 2],
  ['count', 'a bigint for integer', () => 10n],
  ['count', 'SQL injection for integer', () => '1; drop table thing; --'],
  ['big', '2^63 (beyond int8)', () => 2n ** 63n],
  ['big', '-2^63-1 (beyond int8)', () => -(2n ** 63n) - 1n],
  ['big', 'a huge bigint (10^40)', () => 10n ** 40n],
  ['big', 'a number for bigint', () => 42],
  ['big', 'a decimal string for bigint', () => '42'],
  ['big', 'SQL injection for bigint', () => '1) or (1=1'],
  ['amount', 'a string that is not numeric', () => 'abc'],
  ["amount", "'NaN' for numeric", () => 'NaN'],
  ['amount', "'Infinity' for numeric", () => 'Infinity'],
  ['amount', 'NaN for numeric', () => NaN],
  ['amount', 'Infinity for numeric', () => Infinity],
  ['amount', 'a decimal comma', () => '1,5'],
  ['amount', 'a padded number', () => ' 1 '],
  ['amount', 'hexadecimal', () => '0x10'],
  ['amount', 'a boolean for numeric', () => true],
  ['amount', 'SQL injection for numeric', () => '1); drop table thing; --'],
  ['amount', 'a numeric of 131073 integer digits (beyond numeric)', () => '1' + '0'.repeat(131072)],
  ['amount', 'an exponent beyond numeric (1e131072)', () => '1e131072'],
  ['amount', '16384 fraction digits (beyond numeric)', () => '1e-16384'],
  ['amount', 'an exponent beyond int4/2 (0e1073741824)', () => '0e1073741824'],
  ['amount', 'an exponent of 400 digits', () => '1e' + '9'.repeat(400)],
  ['rating', 'a non-numeric string for a ranged numeric', () => 'five'],
  ['flag', "'true' for boolean", () => 'true'],
  ['flag', '1 for boolean', () => 1],
  ['flag', 'null for a non-null boolean', () => null, false],
  ['at', 'an invalid Date', () => new Date('not a date')],
  ['at', 'a date string for timestamptz', () => '2024-01-01T00:00:00Z'],
  ['at', 'epoch milliseconds for timestamptz', () => 1_700_000_000_000],
  ['at', 'a Date in year 275760 (beyond timestamptz text)', () => new Date(8.64e15)],
  ['at', 'a Date in year -271821 (before timestamptz)', () => new Date(-8.64e15)],
  ['at', 'a Date in year 0', () => new Date('0000-06-01T00:00:00Z')],
  ['at', 'a Date in year 10000', () => new Date('+010000-01-01T00:00:00Z')],
  ['at', 'SQL injection for timestamptz', () => "now()); drop table thing; --"],
  ['doc', 'a function for jsonb', () => () => 1, false],
  ['doc', 'a symbol for jsonb', () => Symbol('s'), false],
  ['doc', 'a bigint inside jsonb', () => ({ n: 10n }), false],
  ['doc', 'a cycle in jsonb', () => cycle(), false],
  ['doc', 'NaN inside jsonb', () => ({ n: NaN }), false],
  ['doc', 'Infinity inside jsonb', () => [1, Infinity], false],
  ['doc', 'NaN as jsonb', () => NaN, false],
  ['doc', 'a NUL in a jsonb string', () => ({ s: 'a\0b' }), false],
  ['doc', 'a NUL in a jsonb key', () => ({ ['k\0']: 1 }), false],
  ['doc', 'a lone surrogate in jsonb', () => ['\udc00'], false],
  ['doc', 'a lone surrogate in a jsonb key', () => ({ ['\ud800']: 1 }), false],
  ['doc', 'a toJSON that throws', () => ({ toJSON: () => { throw new Error('no') } }), false],
  ['ref', 'not a UUID', () => 'not-a-uuid'],
  ['ref', 'a number for uuid', () => 42],
  ['ref', 'a UUID in braces', () => '{0190f3a1-7b7c-7cde-8f00-123456789abc}'],
  ['ref', 'SQL injection for uuid', () => "00000000-0000-0000-0000-000000000000'; drop table thing; --"],
  ['mood', 'an unknown enum value', () => 'angry'],
  ['mood', 'an enum value in the wrong case', () => 'CALM'],
  ['mood', 'SQL injection for enum', () => "calm'; drop type mood cascade; --"],
  ['small', '32768 for smallint', () => 32768],
  ['small', '1.5 for smallint', () => 1.5],
  ['dbl', 'a numeric string for double', () => '1.5'],
  ['dbl', 'a bigint for double', () => 1n],
  ['rl', 'a number float4 would change', () => 0.123456789],
  ['rl', 'a number beyond float4', () => 1e39],
  ['day', 'a Date for date', () => new Date()],
  ['day', 'February 30th', () => '2024-02-30'],
  ['day', 'February 29th of a common year', () => '2023-02-29'],
  ['day', 'year 0', () => '0000-01-01'],
  ['day', 'a date with a time', () => '2024-01-01 10:00'],
  ['day', 'SQL injection for date', () => "2024-01-01'; drop table thing; --"],
  ['clock', '25 o’clock', () => '25:00:00'],
  ['clock', 'seven digits of fraction', () => '10:00:00.1234567'],
  ['clock', 'a time zone for time', () => '10:00:00+02'],
  ['stamp', 'a date string for timestamp', () => '2024-01-01 10:00:00'],
  ['stamp', 'a Date in year 10000 for timestamp', () => new Date('+010000-01-01T00:00:00Z')],
  ['span', 'a word for interval', () => 'forever'],
  ['span', 'a unit only', () => 'days'],
  ['span', 'an ISO duration without parts', () => 'P'],
  ['span', 'SQL injection for interval', () => "1 day'; drop table thing; --"],
  ['bytes', 'a string for bytea', () => '\\x00'],
  ['bytes', 'an array of numbers for bytea', () => [1, 2]],
  ['code', 'six characters for varchar(5)', () => 'abcdef'],
  ['code', 'six emoji for varchar(5)', () => '🚀🚀🚀🚀🚀🚀'],
  ['fixed', 'three characters for char(2)', () => 'abc'],
  ['fixed', 'a trailing space for char(2)', () => 'a '],
  ['ip', 'an address out of range', () => '256.0.0.1'],
  ['ip', 'a prefix beyond 32', () => '10.0.0.1/33'],
  ['ip', 'two ::', () => '1::2::3'],
  ['ip', 'a host name', () => 'localhost'],
  ['net', 'host bits set for cidr', () => '10.0.0.1/8'],
  ['list', 'a number for an array', () => 1],
  ['list', 'a NULL element where elements are not nullable', () => [1, null]],
  ['list', 'a string element for int4[]', () => [1, '2']],
  ['list', 'an array of arrays', () => [[1]]],
  ['labels', 'a NUL in an element', () => ['a\0b']],
  ['owner', 'an id for a reference', () => ids.home, false],
  // In find(), `{ owner: { id } }` is a condition on the owner (a join), not a bad value: only create and assign.
  ['owner', 'a plain object for a reference', () => ({ id: ids.home }), false],
  ['owner', 'SQL injection for a reference', () => '1 or 1=1'],
  ['owner', 'a Date for a reference', () => new Date()],
]

function cycle(): unknown {
  const o: Record<string, unknown> = { a: 1 }
  o.self = o
  return o
}

const valueCases: Rejected[] = badValues.flatMap(([prop, what, value, where]): Rejected[] => [
  { name: `create: ${what}`, act: ({ em, valid }) => em.create('Thing', { ...valid(), [prop]: value() } as never), rejects: InvalidValueError, message: new RegExp(`Thing\\.${prop}`) },
  { name: `assign: ${what}`, act: ({ thing }) => set(thing, prop, value()), rejects: InvalidValueError, message: new RegExp(`Thing#\\d+|Thing\\.${prop}`) },
  ...(where === false ? [] : [{ name: `find where: ${what}`, act: ({ em }: Fx) => em.find('Thing', { [prop]: value() } as never), rejects: InvalidValueError }]),
  // em.assign with a valid value first: all or nothing, so the valid one must not be set either.
  {
    name: `em.assign: ${what}, after a valid value`,
    act: ({ em, thing }) => em.assign(thing, { [prop === 'note' ? 'title' : 'note']: 'set by assign', [prop]: value() } as never),
    rejects: InvalidValueError,
    message: new RegExp(`Thing\\.${prop}`),
    check: ({ thing }) => expect([thing.title, thing.note]).not.toContain('set by assign'),
  },
])

const lockCases: Rejected[] = [
  { name: 'find: a lock outside em.transaction()', act: ({ em }) => em.find('Thing', {}, { lock: 'update' }), rejects: EntityStateError, message: /needs em\.transaction\(\)/ },
  { name: 'load: a lock outside em.transaction()', act: ({ em }) => em.load('Thing', ids.thing, { lock: 'share' }), rejects: EntityStateError },
  { name: 'find: wait without a lock', act: ({ em }) => em.find('Thing', {}, { wait: 'skip-locked' }), rejects: InvalidValueError },
  { name: 'find: an unknown lock strength', act: ({ em }) => em.find('Thing', {}, { lock: 'exclusive' } as never), rejects: InvalidValueError },
  { name: 'findOne: an unknown wait', act: ({ em }) => em.findOne('Thing', {}, { lock: 'update', wait: 'forever' } as never), rejects: InvalidValueError },
]

const assignCases: Rejected[] = [
  { name: 'em.assign: an unknown property', act: ({ em, thing }) => em.assign(thing, { title: 'x', colour: 'red' } as never), rejects: InvalidValueError, message: /colour: is not a property of Thing/, check: ({ thing }) => expect(thing.title).not.toBe('x') },
  { name: 'em.assign: the id', act: ({ em, thing }) => em.assign(thing, { id: 1 } as never), rejects: InvalidValueError, message: /is the id/ },
  { name: 'em.assign: a collection', act: ({ em, thing }) => em.assign(thing, { tags: [] } as never), rejects: InvalidValueError, message: /is a collection/ },
  { name: 'em.assign: not an object', act: ({ em, thing }) => em.assign(thing, 'title=x' as never), rejects: InvalidValueError },
  {
    name: 'em.assign: a removed entity',
    prepare: (fx) => {
      const made = fx.em.create('Thing', fx.valid())
      fx.em.remove(made)
      fx.made = { made }
    },
    act: ({ em, made }) => em.assign(made!.made as Thing, { title: 'x' }),
    rejects: EntityStateError,
  },
  { name: 'em.assign: an entity of another EntityManager', act: ({ em, foreignThing }) => em.assign(foreignThing, { title: 'x' }), rejects: EntityStateError },
  { name: 'em.assign: a reference to an entity of another EntityManager', act: ({ em, thing, foreignOwner }) => em.assign(thing, { title: 'x', owner: foreignOwner }), rejects: InvalidValueError, message: /another EntityManager/, check: ({ thing }) => expect(thing.title).not.toBe('x') },
]

/** em.increment: nothing is pending after a rejected one (the keep-owner flush writes only the owner). */
const incrementCases: Rejected[] = [
  { name: 'increment: a text property', act: ({ em, thing }) => em.increment(thing, 'title' as never, 1 as never), rejects: InvalidValueError, message: /title: .*not a number column/ },
  { name: 'increment: a boolean property', act: ({ em, thing }) => em.increment(thing, 'flag' as never, 1 as never), rejects: InvalidValueError, message: /not a number column/ },
  { name: 'increment: a reference', act: ({ em, thing }) => em.increment(thing, 'owner' as never, 1 as never), rejects: InvalidValueError, message: /not a number column/ },
  { name: 'increment: an unknown property', act: ({ em, thing }) => em.increment(thing, 'colour' as never, 1 as never), rejects: InvalidValueError, message: /is not a property of Thing/ },
  { name: 'increment: the id', act: ({ em, thing }) => em.increment(thing, 'id' as never, 1 as never), rejects: InvalidValueError, message: /is the id/ },
  { name: 'increment: a collection', act: ({ em, thing }) => em.increment(thing, 'tags' as never, 1 as never), rejects: InvalidValueError, message: /is a collection/ },
  { name: 'increment: a fraction for an integer', act: ({ em, thing }) => em.increment(thing, 'count', 1.5), rejects: InvalidValueError, message: /not a valid increment/ },
  { name: 'increment: NaN', act: ({ em, thing }) => em.increment(thing, 'count', NaN), rejects: InvalidValueError },
  { name: 'increment: a string for an integer', act: ({ em, thing }) => em.increment(thing, 'count', '1' as never), rejects: InvalidValueError },
  { name: 'increment: undefined', act: ({ em, thing }) => em.increment(thing, 'count', undefined as never), rejects: InvalidValueError },
  { name: 'increment: a number for a bigint', act: ({ em, thing }) => em.increment(thing, 'big', 1 as never), rejects: InvalidValueError },
  { name: 'increment: a bigint out of int8', act: ({ em, thing }) => em.increment(thing, 'big', 2n ** 63n), rejects: InvalidValueError },
  { name: 'increment: not a decimal for a numeric', act: ({ em, thing }) => em.increment(thing, 'amount', '1; drop table thing'), rejects: InvalidValueError },
  { name: 'increment: Infinity for a numeric', act: ({ em, thing }) => em.increment(thing, 'amount', Infinity as never), rejects: InvalidValueError },
  {
    name: 'increment: pending increments that add up past int4',
    prepare: ({ em, thing }) => em.increment(thing, 'count', 2 ** 31 - 1),
    act: ({ em, thing }) => em.increment(thing, 'count', 1),
    rejects: InvalidValueError,
    message: /pending increment of 2147483648/,
    repair: ({ thing }) => (thing.count = thing.count), // an assignment replaces what is pending
  },
  {
    name: 'increment: a removed entity',
    prepare: (fx) => {
      const made = fx.em.create('Thing', fx.valid())
      fx.em.remove(made)
      fx.made = { made }
    },
    act: ({ em, made }) => em.increment(made!.made as Thing, 'count', 1),
    rejects: EntityStateError,
  },
  { name: 'increment: an entity of another EntityManager', act: ({ em, foreignThing }) => em.increment(foreignThing, 'count', 1), rejects: EntityStateError },
  { name: 'increment: not an entity', act: ({ em }) => em.increment(null as never, 'count' as never, 1 as never), rejects: EntityStateError },
]

/** em.upsert: the key and the data are checked before anything is pending. */
const upsertCases: Rejected[] = [
  { name: 'upsert: onConflict names a property that is not unique', act: ({ em, valid }) => em.upsert('Thing', valid(), { onConflict: 'title' }), rejects: InvalidValueError, message: /onConflict: is not a unique key of Thing/ },
  { name: 'upsert: onConflict names no property', act: ({ em }) => em.upsert('Code', { id: 1, value: 'x' }, { onConflict: 'colour' as never }), rejects: InvalidValueError },
  { name: 'upsert: onConflict missing', act: ({ em }) => em.upsert('Code', { id: 1, value: 'x' }, {} as never), rejects: InvalidValueError },
  { name: 'upsert: options null', act: ({ em }) => em.upsert('Code', { id: 1, value: 'x' }, null as never), rejects: InvalidValueError },
  { name: 'upsert: onConflict an empty list', act: ({ em }) => em.upsert('Code', { id: 1, value: 'x' }, { onConflict: [] }), rejects: InvalidValueError },
  { name: 'upsert: on a sequence id', act: ({ em, valid }) => em.upsert('Thing', valid(), { onConflict: 'id' as never }), rejects: InvalidValueError, message: /upsert by a unique key/ },
  { name: 'upsert: the key left out', act: ({ em }) => em.upsert('Code', { value: 'x' } as never, { onConflict: 'id' }), rejects: InvalidValueError, message: /is the upsert's key/ },
  { name: 'upsert: a key of the wrong type', act: ({ em }) => em.upsert('Code', { id: '7', value: 'x' } as never, { onConflict: 'id' }), rejects: InvalidValueError },
  { name: 'upsert: a bad value beside the key', act: ({ em }) => em.upsert('Code', { id: 7, value: 42 } as never, { onConflict: 'id' }), rejects: InvalidValueError },
  { name: 'upsert: data not an object', act: ({ em }) => em.upsert('Code', 'id=7' as never, { onConflict: 'id' }), rejects: InvalidValueError },
]

const requiredCases: Rejected[] = [
  { name: 'create: a required text left out', act: ({ em, home }) => em.create('Thing', { owner: home } as never), rejects: InvalidValueError, message: /title: is required/ },
  { name: 'create: undefined for a required text', act: ({ em, home }) => em.create('Thing', { title: undefined, owner: home } as never), rejects: InvalidValueError, message: /title: is required/ },
  { name: 'create: null for a required text', act: ({ em, home }) => em.create('Thing', { title: null, owner: home } as never), rejects: InvalidValueError, message: /not nullable/ },
  { name: 'create: a required reference left out', act: ({ em }) => em.create('Thing', { title: 'x' } as never), rejects: InvalidValueError, message: /owner: is required/ },
  { name: 'create: undefined for a required reference', act: ({ em }) => em.create('Thing', { title: 'x', owner: undefined } as never), rejects: InvalidValueError },
  { name: 'create: null for a required reference', act: ({ em }) => em.create('Thing', { title: 'x', owner: null } as never), rejects: InvalidValueError },
  { name: 'assign: undefined to a required text', act: ({ thing }) => set(thing, 'title', undefined), rejects: InvalidValueError },
  { name: 'assign: null to a required text', act: ({ thing }) => set(thing, 'title', null), rejects: InvalidValueError },
  { name: 'assign: undefined to a nullable text', act: ({ thing }) => set(thing, 'note', undefined), rejects: InvalidValueError },
  { name: 'assign: undefined to a required reference', act: ({ thing }) => set(thing, 'owner', undefined), rejects: InvalidValueError },
  { name: 'assign: null to a required reference', act: ({ thing }) => set(thing, 'owner', null), rejects: InvalidValueError },
  { name: 'create: a provided id left out', act: ({ em }) => em.create('Code', { value: 'x' } as never), rejects: InvalidValueError },
  { name: 'create: undefined for a provided id', act: ({ em }) => em.create('Code', { id: undefined, value: 'x' } as never), rejects: InvalidValueError },
  { name: 'create: a string for a provided id', act: ({ em }) => em.create('Code', { id: '7', value: 'x' } as never), rejects: InvalidValueError },
  { name: 'create: an unsafe integer for a provided id', act: ({ em }) => em.create('Code', { id: 2 ** 53, value: 'x' } as never), rejects: InvalidValueError },
  { name: 'create: NaN for a provided id', act: ({ em }) => em.create('Code', { id: NaN, value: 'x' } as never), rejects: InvalidValueError },
  { name: 'create: SQL injection for a uuid id', act: ({ em }) => em.create('Tag', { id: "'; drop table tag; --", name: 'x' } as never), rejects: InvalidValueError },
  { name: 'create: an id for a sequence id', act: ({ em, valid }) => em.create('Thing', { ...valid(), id: 5 } as never), rejects: InvalidValueError },
  { name: 'create: undefined for a required text of a provided-id entity', act: ({ em }) => em.create('Code', { id: 7, value: undefined } as never), rejects: InvalidValueError },
]

/** Checked at flush (rules): nothing is sent; fixing the value lets the same EntityManager flush. */
const ruleCases: Rejected[] = [
  {
    name: 'flush: a text over its .length()',
    act: async (fx) => {
      fx.made = fx.em.create('Thing', { ...fx.valid(), short: '123456' }) as never
      await fx.em.flush()
    },
    atFlush: true,
    rejects: ValidationError,
    message: /short must be at most 5 characters long/,
    repair: (fx) => set(fx.made!, 'short', '12345'),
    delta: { thing: 1 },
  },
  {
    name: 'flush: six emoji over a .length() of 5 (code points)',
    act: async (fx) => {
      fx.made = fx.em.create('Thing', { ...fx.valid(), short: '🚀'.repeat(6) }) as never
      await fx.em.flush()
    },
    atFlush: true,
    rejects: ValidationError,
    repair: (fx) => set(fx.made!, 'short', '🚀'.repeat(5)),
    delta: { thing: 1 },
  },
  {
    name: 'flush: a loaded text changed past its .length()',
    act: async (fx) => {
      fx.thing.short = 'much too long'
      await fx.em.flush()
    },
    atFlush: true,
    rejects: ValidationError,
    repair: (fx) => set(fx.thing, 'short', null),
  },
  {
    name: 'flush: an owner name of 41 characters (max 40)',
    act: async (fx) => {
      fx.made = fx.em.create('Owner', { name: 'n'.repeat(41) }) as never
      await fx.em.flush()
    },
    atFlush: true,
    rejects: ValidationError,
    repair: (fx) => set(fx.made!, 'name', 'n'.repeat(40)),
    delta: { owner: 1 },
  },
  {
    name: 'flush: a numeric above its .range()',
    act: async (fx) => {
      fx.made = fx.em.create('Thing', { ...fx.valid(), rating: '5.0000000000000000001' }) as never
      await fx.em.flush()
    },
    atFlush: true,
    rejects: ValidationError,
    message: /rating must be at most 5/,
    repair: (fx) => set(fx.made!, 'rating', '5'),
    delta: { thing: 1 },
  },
  {
    name: 'flush: a negative numeric below its .range()',
    act: async (fx) => {
      fx.made = fx.em.create('Thing', { ...fx.valid(), rating: -0.5 as never }) as never
      await fx.em.flush()
    },
    atFlush: true,
    rejects: ValidationError,
    repair: (fx) => set(fx.made!, 'rating', 0),
    delta: { thing: 1 },
  },
]

const unknownPropertyCases: Rejected[] = [
  { name: 'create: an unknown property', act: ({ em, valid }) => em.create('Thing', { ...valid(), colour: 'red' } as never), rejects: InvalidValueError, message: /colour/ },
  { name: 'create: a misspelt property', act: ({ em, home }) => em.create('Thing', { titel: 'x', title: 'x', owner: home } as never), rejects: InvalidValueError },
  { name: 'create: a __proto__ key of a parsed request body', act: ({ em, valid }) => em.create('Thing', { ...valid(), ...(JSON.parse('{"__proto__": {"admin": true}}') as object) } as never), rejects: InvalidValueError },
  { name: 'create: a constructor key', act: ({ em, valid }) => em.create('Thing', { ...valid(), constructor: 'x' } as never), rejects: InvalidValueError },
  { name: 'create: an SQL-injection key', act: ({ em, valid }) => em.create('Thing', { ...valid(), 'title"; drop table thing; --': 'x' } as never), rejects: InvalidValueError },
  { name: 'create: a one-to-many collection', act: ({ em }) => em.create('Owner', { name: 'x', things: [] } as never), rejects: InvalidValueError },
  { name: 'create: a number for a uuid id', act: ({ em }) => em.create('Tag', { id: 1, name: 'x' } as never), rejects: InvalidValueError },
  { name: 'create: null as the data', act: ({ em }) => em.create('Thing', null as never), rejects: InvalidValueError },
  { name: 'create: a string as the data', act: ({ em }) => em.create('Thing', 'title' as never), rejects: InvalidValueError },
  { name: 'create: an array as the data', act: ({ em, home }) => em.create('Thing', ['x', home] as never), rejects: InvalidValueError },
  { name: 'assign: an unknown property', act: ({ thing }) => set(thing, 'colour', 'red'), rejects: InvalidValueError, message: /colour/ },
  { name: 'assign: a misspelt property', act: ({ thing }) => set(thing, 'titel', 'x'), rejects: InvalidValueError },
  {
    name: 'assign: Object.assign of a request body with an unknown key',
    act: ({ thing }) => Object.assign(thing, JSON.parse('{"isAdmin": true, "title": "hijacked"}') as object),
    rejects: InvalidValueError,
    check: ({ thing }) => expect(thing.title).toBe('fixture'),
  },
  { name: 'assign: an unknown property on a reference not yet loaded', act: ({ em }) => set(em.ref('Owner', ids.home), 'nmae', 'x'), rejects: InvalidValueError },
  { name: 'assign: an unknown property on a new entity', act: ({ em, valid }) => set(em.create('Thing', valid()), 'extra', 1), rejects: InvalidValueError, delta: { thing: 1 } },
  { name: 'assign: a one-to-many collection', act: ({ home }) => set(home, 'things', []), rejects: EntityStateError },
  { name: 'assign: a many-to-many collection', act: ({ thing, tag }) => set(thing, 'tags', [tag]), rejects: EntityStateError },
  { name: 'assign: the id', act: ({ thing }) => set(thing, 'id', 99), rejects: EntityStateError },
  { name: 'create: an unknown entity', act: ({ em }) => em.create('Nope' as never, {} as never), rejects: SchemaError },
  { name: 'create: SQL injection as the entity name', act: ({ em }) => em.create("Thing'; drop table thing; --" as never, {} as never), rejects: SchemaError },
  { name: 'load: SQL injection as the entity name', act: ({ em }) => em.load('thing; drop table thing' as never, 1 as never), rejects: SchemaError },
  { name: 'load: SQL injection as the id', act: ({ em }) => em.load('Thing', '1; drop table thing; --' as never), rejects: InvalidValueError },
  { name: 'load: NaN as the id', act: ({ em }) => em.load('Thing', NaN), rejects: InvalidValueError },
  { name: 'load: a uuid id that is not a UUID', act: ({ em }) => em.load('Tag', "' or 1=1 --"), rejects: InvalidValueError },
  { name: 'ref: SQL injection as the id', act: ({ em }) => em.ref('Owner', '1 or 1=1' as never), rejects: InvalidValueError },
  { name: 'populate: an unknown relation', act: ({ em, home }) => em.populate(home, 'nope' as never), rejects: InvalidValueError },
  { name: 'populate: SQL injection as the relation', act: ({ em, home }) => em.populate(home, 'things; drop table thing' as never), rejects: InvalidValueError },
]

const referenceCases: Rejected[] = [
  { name: 'create: a reference to an entity of another EntityManager', act: ({ em, foreignOwner }) => em.create('Thing', { title: 'x', owner: foreignOwner }), rejects: InvalidValueError, message: /another EntityManager/ },
  { name: 'assign: a reference to an entity of another EntityManager', act: ({ thing, foreignOwner }) => set(thing, 'owner', foreignOwner), rejects: InvalidValueError, message: /another EntityManager/ },
  { name: 'create: a reference to an entity of the wrong type', act: ({ em, tag }) => em.create('Thing', { title: 'x', owner: tag as never }), rejects: InvalidValueError },
  { name: 'create: a reference to a removed and flushed entity', act: ({ em, gone }) => em.create('Thing', { title: 'x', owner: gone }), rejects: InvalidValueError, message: /detached/ },
  { name: 'assign: a reference to a removed and flushed entity', act: ({ thing, gone }) => set(thing, 'owner', gone), rejects: InvalidValueError },
  {
    name: 'create: a reference to a removed entity (removal not flushed)',
    prepare: async (fx) => {
      const victim = fx.em.create('Owner', { name: 'victim' })
      await fx.em.flush()
      fx.em.remove(victim)
      fx.made = victim as never
    },
    act: (fx) => fx.em.create('Thing', { title: 'x', owner: fx.made as never }),
    rejects: InvalidValueError,
    message: /removed/,
    delta: { owner: 0 }, // the victim, inserted and then deleted by the repaired flush
  },
  {
    name: 'create: a reference to a new entity removed before any flush',
    act: ({ em }) => {
      const ghost = em.create('Owner', { name: 'ghost' })
      em.remove(ghost)
      em.create('Thing', { title: 'x', owner: ghost })
    },
    rejects: InvalidValueError,
  },
  {
    name: 'flush: a reference whose target was removed after it was set (new target)',
    act: async (fx) => {
      const late = fx.em.create('Owner', { name: 'late' })
      fx.made = fx.em.create('Thing', { title: 'x', owner: late }) as never
      fx.em.remove(late)
      await fx.em.flush()
    },
    atFlush: true,
    rejects: EntityStateError,
    repair: (fx) => set(fx.made!, 'owner', fx.home),
    delta: { thing: 1 },
  },
  {
    name: 'flush: a reference whose target was removed after it was set (loaded target)',
    prepare: async (fx) => {
      const victim = fx.em.create('Owner', { name: 'victim' })
      await fx.em.flush()
      fx.made = victim as never
    },
    act: async (fx) => {
      fx.thing.owner = fx.made as never
      fx.em.remove(fx.made as never)
      await fx.em.flush()
    },
    atFlush: true,
    rejects: EntityStateError,
    repair: (fx) => set(fx.thing, 'owner', fx.home),
    delta: { owner: 0 },
  },
  { name: 'assign: a property of a removed and flushed entity', act: ({ gone }) => set(gone, 'name', 'x'), rejects: EntityStateError },
  {
    name: 'assign: a property of a removed entity (removal not flushed)',
    prepare: async (fx) => {
      const victim = fx.em.create('Owner', { name: 'victim' })
      await fx.em.flush()
      fx.em.remove(victim)
      fx.made = victim as never
    },
    act: (fx) => set(fx.made!, 'name', 'x'),
    rejects: EntityStateError,
    delta: { owner: 0 },
  },
  { name: 'many-to-many add: an entity of another EntityManager', act: ({ thing, foreignTag }) => thing.tags.add(foreignTag), rejects: EntityStateError },
  { name: 'many-to-many add: a removed and flushed entity', act: ({ thing, goneTag }) => thing.tags.add(goneTag), rejects: EntityStateError },
  { name: 'many-to-many add: an entity of the wrong type', act: ({ thing, home }) => thing.tags.add(home as never), rejects: EntityStateError },
  { name: 'many-to-many add: a plain object', act: ({ thing }) => thing.tags.add({ id: ids.tag } as never), rejects: EntityStateError },
  { name: 'many-to-many add: null', act: ({ thing }) => thing.tags.add(null as never), rejects: EntityStateError },
  { name: 'many-to-many remove: undefined', act: ({ thing }) => thing.tags.remove(undefined as never), rejects: EntityStateError },
  { name: 'create: many-to-many items that are not an array', act: ({ em, valid }) => em.create('Thing', { ...valid(), tags: 'x' } as never), rejects: InvalidValueError },
  {
    name: 'create: a many-to-many item of another EntityManager (nothing tracked)',
    act: ({ em, valid, tag, foreignTag }) => em.create('Thing', { ...valid(), tags: [tag, foreignTag] }),
    rejects: EntityStateError,
  },
  { name: 'create: a null many-to-many item (nothing tracked)', act: ({ em, valid }) => em.create('Thing', { ...valid(), tags: [null] } as never), rejects: EntityStateError },
  { name: 'one-to-many add: a plain object', act: ({ home }) => home.things.add({ title: 'x' } as never), rejects: EntityStateError },
  { name: 'one-to-many add: null', act: ({ home }) => home.things.add(null as never), rejects: EntityStateError },
  { name: 'one-to-many add: an entity of the wrong type', act: ({ home, tag }) => home.things.add(tag as never), rejects: EntityStateError },
  { name: 'one-to-many add: an entity of another EntityManager', act: ({ home, foreignThing }) => home.things.add(foreignThing), rejects: EntityStateError },
  { name: 'one-to-many remove: null', act: ({ home }) => home.things.remove(null as never), rejects: EntityStateError },
  { name: 'remove: an entity of another EntityManager', act: ({ em, foreignOwner }) => em.remove(foreignOwner), rejects: EntityStateError },
  { name: 'remove: a plain object', act: ({ em }) => em.remove({ id: ids.home } as never), rejects: EntityStateError },
  { name: 'remove: an entity already removed and flushed', act: ({ em, gone }) => em.remove(gone), rejects: EntityStateError },
  { name: 'populate: an entity of another EntityManager', act: ({ em, foreignOwner }) => em.populate(foreignOwner, 'things'), rejects: EntityStateError },
  {
    name: 'flush: a reference (by id, fresh EntityManager) to a row deleted meanwhile',
    act: async (fx) => {
      fx.made = fx.em.create('Thing', { title: 'x', owner: fx.em.ref('Owner', fx.gone.id) }) as never
      await fx.em.flush()
    },
    server: true,
    rejects: ForeignKeyViolationError,
    repair: (fx) => set(fx.made!, 'owner', fx.home),
    delta: { thing: 1 },
  },
]

/** Values changed in place after they were checked (a Date's setters, a JSON object's properties). */
const inPlaceCases: Rejected[] = [
  {
    name: 'flush: a new Date made invalid in place',
    act: async (fx) => {
      const at = new Date()
      fx.made = fx.em.create('Thing', { ...fx.valid(), at }) as never
      at.setTime(NaN)
      await fx.em.flush()
    },
    atFlush: true,
    rejects: InvalidValueError,
    repair: (fx) => (fx.made!.at as Date).setTime(0),
    delta: { thing: 1 },
  },
  {
    name: 'flush: a loaded Date made invalid in place',
    act: async ({ em, thing }) => {
      thing.at!.setUTCMonth(NaN)
      await em.flush()
    },
    atFlush: true,
    rejects: InvalidValueError,
    repair: ({ thing }) => thing.at!.setTime(FIXTURE_AT.getTime()),
  },
  {
    name: 'flush: a loaded Date moved to year 10000 in place',
    act: async ({ em, thing }) => {
      thing.at!.setUTCFullYear(10000)
      await em.flush()
    },
    atFlush: true,
    rejects: InvalidValueError,
    repair: ({ thing }) => thing.at!.setTime(FIXTURE_AT.getTime()),
  },
  {
    name: 'flush: a bigint put into a new jsonb object in place',
    act: async (fx) => {
      const doc: Record<string, unknown> = { a: 1 }
      fx.made = fx.em.create('Thing', { ...fx.valid(), doc }) as never
      doc.n = 10n
      await fx.em.flush()
    },
    atFlush: true,
    rejects: InvalidValueError,
    repair: (fx) => delete (fx.made!.doc as Record<string, unknown>).n,
    delta: { thing: 1 },
  },
  {
    name: 'flush: a NUL put into a loaded jsonb object in place',
    act: async ({ em, thing }) => {
      ;(thing.doc as Record<string, unknown>).s = 'a\0b'
      await em.flush()
    },
    atFlush: true,
    rejects: InvalidValueError,
    repair: ({ thing }) => delete (thing.doc as Record<string, unknown>).s,
  },
  {
    name: 'flush: NaN put into a loaded jsonb object in place',
    act: async ({ em, thing }) => {
      ;(thing.doc as Record<string, unknown>).a = NaN
      await em.flush()
    },
    atFlush: true,
    rejects: InvalidValueError,
    repair: ({ thing }) => set(thing.doc as object, 'a', 1),
  },
  {
    name: 'flush: a cycle made in a loaded jsonb object',
    act: async ({ em, thing }) => {
      ;(thing.doc as Record<string, unknown>).self = thing.doc
      await em.flush()
    },
    atFlush: true,
    rejects: InvalidValueError,
    repair: ({ thing }) => delete (thing.doc as Record<string, unknown>).self,
  },
]

/** find()/findOne() keys, operators and options: rejected before the query is sent. */
const findCases: Rejected[] = [
  { name: 'find where: a key that is not a property', act: ({ em }) => em.find('Thing', { colour: 'red' } as never), rejects: InvalidValueError, message: /colour/ },
  { name: 'find where: a key that is not a property, with an undefined value', act: ({ em }) => em.find('Thing', { titel: undefined } as never), rejects: InvalidValueError },
  { name: 'find where: SQL injection as a key', act: ({ em }) => em.find('Thing', { 'title" = title or 1=1; drop table thing; --': 'x' } as never), rejects: InvalidValueError },
  { name: 'find where: a __proto__ key of a parsed request body', act: ({ em }) => em.find('Thing', JSON.parse('{"__proto__": {"title": "x"}}') as never), rejects: InvalidValueError },
  { name: 'find where: a constructor key', act: ({ em }) => em.find('Thing', { constructor: 'x' } as never), rejects: InvalidValueError },
  { name: 'find where: a dotted path key', act: ({ em }) => em.find('Thing', { 'owner.name': 'home' } as never), rejects: InvalidValueError },
  { name: 'find where: a collection key', act: ({ em }) => em.find('Thing', { tags: ids.tag } as never), rejects: InvalidValueError },
  { name: 'find where: a jsonb key', act: ({ em }) => em.find('Thing', { doc: { a: 1 } } as never), rejects: InvalidValueError },
  { name: 'find where: SQL injection as an operator', act: ({ em }) => em.find('Thing', { title: { "= 'x' or 1=1 --": 'x' } } as never), rejects: InvalidValueError },
  { name: 'find where: an unknown operator with an undefined value', act: ({ em }) => em.find('Thing', { title: { equals: undefined } } as never), rejects: InvalidValueError },
  { name: "find where: 'constructor' as an operator", act: ({ em }) => em.find('Thing', { title: { constructor: 'x' } } as never), rejects: InvalidValueError },
  { name: "find where: 'toString' as an operator", act: ({ em }) => em.find('Thing', { count: { toString: 1 } } as never), rejects: InvalidValueError },
  { name: "find where: '__proto__' as an operator (parsed body)", act: ({ em }) => em.find('Thing', { title: JSON.parse('{"__proto__": "x"}') } as never), rejects: InvalidValueError },
  { name: "find where: a string for isNull", act: ({ em }) => em.find('Thing', { note: { isNull: 'false' } } as never), rejects: InvalidValueError },
  { name: 'find where: a number for isNull', act: ({ em }) => em.find('Thing', { note: { isNull: 1 } } as never), rejects: InvalidValueError },
  { name: 'find where: a like pattern with a NUL', act: ({ em }) => em.find('Thing', { title: { like: 'a\0%' } }), rejects: InvalidValueError },
  { name: 'find where: a like pattern with a lone surrogate', act: ({ em }) => em.find('Thing', { title: { like: '\ud800%' } }), rejects: InvalidValueError },
  { name: 'find where: a number as a like pattern', act: ({ em }) => em.find('Thing', { title: { like: 1 } } as never), rejects: InvalidValueError },
  { name: 'find where: like on a uuid column', act: ({ em }) => em.find('Thing', { ref: { like: '0190%' } } as never), rejects: InvalidValueError },
  { name: 'find where: like on a numeric column', act: ({ em }) => em.find('Thing', { amount: { like: '1%' } } as never), rejects: InvalidValueError },
  { name: 'find where: like on an enum column', act: ({ em }) => em.find('Thing', { mood: { like: 'c%' } } as never), rejects: InvalidValueError },
  { name: 'find where: like on an integer column', act: ({ em }) => em.find('Thing', { count: { like: '1%' } } as never), rejects: InvalidValueError },
  { name: 'find where: like on the id', act: ({ em }) => em.find('Thing', { id: { like: '1%' } } as never), rejects: InvalidValueError },
  { name: 'find where: a string for in', act: ({ em }) => em.find('Thing', { title: { in: "'a', 'b'" } } as never), rejects: InvalidValueError },
  { name: 'find where: a NUL among in values', act: ({ em }) => em.find('Thing', { title: { in: ['a', 'b\0'] } }), rejects: InvalidValueError },
  { name: 'find where: SQL injection among integer in values', act: ({ em }) => em.find('Thing', { count: { in: [1, '2) or (1=1'] } } as never), rejects: InvalidValueError },
  { name: 'find where: null for eq', act: ({ em }) => em.find('Thing', { title: { eq: null } } as never), rejects: InvalidValueError },
  { name: 'find where: SQL injection for the id', act: ({ em }) => em.find('Thing', { id: '1; delete from thing; --' } as never), rejects: InvalidValueError },
  { name: 'find where: SQL injection in a gt on the id', act: ({ em }) => em.find('Thing', { id: { gt: '0) or (1=1' } } as never), rejects: InvalidValueError },
  { name: 'find where: a new entity (not inserted yet) for a reference', act: ({ em }) => em.find('Thing', { owner: em.create('Owner', { name: 'new' }) }), rejects: EntityStateError, delta: { owner: 1 } },
  { name: 'find where: an entity of the wrong type for a reference', act: ({ em, tag }) => em.find('Thing', { owner: tag as never }), rejects: InvalidValueError },
  { name: 'find where: null instead of an object', act: ({ em }) => em.find('Thing', null as never), rejects: InvalidValueError },
  { name: 'find where: an array instead of an object', act: ({ em }) => em.find('Thing', [{ title: 'x' }] as never), rejects: InvalidValueError },
  { name: 'find where: a string instead of an object', act: ({ em }) => em.find('Thing', "title = 'x' or 1=1" as never), rejects: InvalidValueError },
  { name: 'find where: an entity instead of an object', act: ({ em, thing }) => em.find('Thing', thing as never), rejects: InvalidValueError },
  { name: 'find options: null', act: ({ em }) => em.find('Thing', {}, null as never), rejects: InvalidValueError },
  { name: 'find orderBy: a key that is not a property', act: ({ em }) => em.find('Thing', {}, { orderBy: { colour: 'asc' } as never }), rejects: InvalidValueError, message: /colour/ },
  { name: 'find orderBy: SQL injection as a key', act: ({ em }) => em.find('Thing', {}, { orderBy: { 'title; drop table thing; --': 'asc' } as never }), rejects: InvalidValueError },
  { name: 'find orderBy: SQL injection as the direction', act: ({ em }) => em.find('Thing', {}, { orderBy: { title: 'asc; drop table thing; --' } as never }), rejects: InvalidValueError },
  { name: 'find orderBy: an upper-case direction', act: ({ em }) => em.find('Thing', {}, { orderBy: { title: 'DESC' } as never }), rejects: InvalidValueError },
  { name: 'find orderBy: an unknown key with an undefined direction', act: ({ em }) => em.find('Thing', {}, { orderBy: { colour: undefined } as never }), rejects: InvalidValueError, message: /colour/ },
  { name: 'find orderBy: a jsonb column', act: ({ em }) => em.find('Thing', {}, { orderBy: { doc: 'asc' } as never }), rejects: InvalidValueError },
  { name: 'find orderBy: a collection', act: ({ em }) => em.find('Thing', {}, { orderBy: { tags: 'asc' } as never }), rejects: InvalidValueError },
  { name: 'find orderBy: an array of keys', act: ({ em }) => em.find('Thing', {}, { orderBy: ['title'] as never }), rejects: InvalidValueError },
  { name: 'find limit: SQL injection', act: ({ em }) => em.find('Thing', {}, { limit: '1; drop table thing' as never }), rejects: InvalidValueError },
  { name: 'find limit: negative', act: ({ em }) => em.find('Thing', {}, { limit: -1 }), rejects: InvalidValueError },
  { name: 'find limit: a fraction', act: ({ em }) => em.find('Thing', {}, { limit: 1.5 }), rejects: InvalidValueError },
  { name: 'find limit: Infinity', act: ({ em }) => em.find('Thing', {}, { limit: Infinity }), rejects: InvalidValueError },
  { name: 'findOne where: SQL injection as a key', act: ({ em }) => em.findOne('Thing', { '1=1 or title': 'x' } as never), rejects: InvalidValueError },
  { name: 'findOne where: SQL injection as a value of an enum', act: ({ em }) => em.findOne('Thing', { mood: "calm' or '1'='1" } as never), rejects: InvalidValueError },
  { name: 'find: an unknown entity', act: ({ em }) => em.find('Thing; drop table thing' as never), rejects: SchemaError },
]

/** The reads of a list endpoint: each refuses bad input before it sends anything. */
const readCases: Rejected[] = [
  { name: 'find: withDeleted not a boolean', act: ({ em }) => em.find('Thing', {}, { withDeleted: 'true' } as never), rejects: InvalidValueError, message: /withDeleted/ },
  { name: 'count: withDeleted not a boolean', act: ({ em }) => em.count('Thing', {}, { withDeleted: 1 } as never), rejects: InvalidValueError, message: /withDeleted/ },
  { name: 'exists: withDeleted not a boolean', act: ({ em }) => em.exists('Thing', {}, { withDeleted: null } as never), rejects: InvalidValueError, message: /withDeleted/ },
  { name: 'aggregate: withDeleted not a boolean', act: ({ em }) => em.aggregate('Thing', {}, {}, { withDeleted: 'yes' } as never), rejects: InvalidValueError, message: /withDeleted/ },
  { name: 'load: withDeleted not a boolean', act: ({ em }) => em.load('Thing', ids.thing, { withDeleted: 'no' } as never), rejects: InvalidValueError, message: /withDeleted/ },
  { name: 'findPage: withDeleted not a boolean', act: ({ em }) => em.findPage('Thing', {}, { first: 2, withDeleted: 0 } as never), rejects: InvalidValueError, message: /withDeleted/ },
  { name: 'stream: withDeleted not a boolean', act: ({ em }) => em.stream('Thing', {}, { withDeleted: 'all' } as never).next(), rejects: InvalidValueError, message: /withDeleted/ },
  { name: 'where: or not an array', act: ({ em }) => em.find('Thing', { or: { title: 'a' } } as never), rejects: InvalidValueError, message: /or/ },
  { name: 'where: and holding a string', act: ({ em }) => em.find('Thing', { and: ['title'] } as never), rejects: InvalidValueError },
  { name: 'where: not an array for not', act: ({ em }) => em.find('Thing', { not: [{ title: 'a' }] } as never), rejects: InvalidValueError },
  { name: 'where: null for not', act: ({ em }) => em.find('Thing', { not: null } as never), rejects: InvalidValueError },
  { name: 'where: some on a many-to-one', act: ({ em }) => em.find('Thing', { owner: { some: { name: 'x' } } } as never), rejects: InvalidValueError },
  { name: 'where: a value for a collection', act: ({ em }) => em.find('Owner', { things: { title: 'x' } } as never), rejects: InvalidValueError },
  { name: 'where: an unknown quantifier', act: ({ em }) => em.find('Owner', { things: { any: { title: 'x' } } } as never), rejects: InvalidValueError, message: /any/ },
  { name: 'where: a bad value inside every', act: ({ em }) => em.find('Owner', { things: { every: { count: 'lots' } } } as never), rejects: InvalidValueError },
  { name: 'where: an unknown property through a many-to-one', act: ({ em }) => em.find('Thing', { owner: { nmae: 'x' } } as never), rejects: InvalidValueError, message: /nmae/ },
  { name: 'where: operators mixed with conditions on the target', act: ({ em }) => em.find('Thing', { owner: { eq: ids.home, name: 'x' } } as never), rejects: InvalidValueError },
  { name: 'where: SQL injection through a many-to-one', act: ({ em }) => em.find('Thing', { owner: { name: { "ilike '%' or 1=1 --": 'x' } } } as never), rejects: InvalidValueError },
  { name: 'where: between with one bound', act: ({ em }) => em.find('Thing', { count: { between: [1] } } as never), rejects: InvalidValueError },
  { name: 'where: between with a bad bound', act: ({ em }) => em.find('Thing', { count: { between: [1, 'x'] } } as never), rejects: InvalidValueError },
  { name: 'where: nin not an array', act: ({ em }) => em.find('Thing', { title: { nin: 'a' } } as never), rejects: InvalidValueError },
  { name: 'where: ilike on an enum', act: ({ em }) => em.find('Thing', { mood: { ilike: 'c%' } } as never), rejects: InvalidValueError },
  { name: 'where: gt on a boolean', act: ({ em }) => em.find('Thing', { flag: { gt: false } } as never), rejects: InvalidValueError },
  { name: 'where: a number for hasKey', act: ({ em }) => em.find('Thing', { doc: { hasKey: 1 } } as never), rejects: InvalidValueError },
  { name: 'where: NaN inside contains', act: ({ em }) => em.find('Thing', { doc: { contains: { n: NaN } } } as never), rejects: InvalidValueError },
  { name: 'where: a document for a jsonb column', act: ({ em }) => em.find('Thing', { doc: { a: 1 } } as never), rejects: InvalidValueError },
  { name: 'count: an unknown property', act: ({ em }) => em.count('Thing', { colour: 'red' } as never), rejects: InvalidValueError },
  { name: 'exists: a bad value', act: ({ em }) => em.exists('Thing', { count: 1.5 } as never), rejects: InvalidValueError },
  { name: 'aggregate: the sum of a text column', act: ({ em }) => em.aggregate('Thing', {}, { sum: ['title'] } as never), rejects: InvalidValueError },
  { name: 'aggregate: the average of a reference', act: ({ em }) => em.aggregate('Thing', {}, { avg: ['owner'] } as never), rejects: InvalidValueError },
  { name: 'aggregate: the maximum of a jsonb column', act: ({ em }) => em.aggregate('Thing', {}, { max: ['doc'] } as never), rejects: InvalidValueError },
  { name: 'aggregate: an unknown function', act: ({ em }) => em.aggregate('Thing', {}, { median: ['count'] } as never), rejects: InvalidValueError },
  { name: 'aggregate: groupBy not an array', act: ({ em }) => em.aggregate('Thing', {}, { groupBy: 'mood' } as never), rejects: InvalidValueError },
  { name: 'aggregate: SQL injection as a column', act: ({ em }) => em.aggregate('Thing', {}, { groupBy: ['mood" from thing; drop table thing; --'] } as never), rejects: InvalidValueError },
  { name: 'findPage: no page size', act: ({ em }) => em.findPage('Thing', {}, {} as never), rejects: InvalidValueError },
  { name: 'findPage: a fractional page size', act: ({ em }) => em.findPage('Thing', {}, { first: 2.5 }), rejects: InvalidValueError },
  { name: 'findPage: a bad direction', act: ({ em }) => em.findPage('Thing', {}, { first: 2, orderBy: { title: 'up' } } as never), rejects: InvalidValueError },
  { name: 'findPage: a made-up cursor', act: ({ em }) => em.findPage('Thing', {}, { first: 2, after: 'eyJ4IjoxfQ.abc' }), rejects: InvalidCursorError },
  { name: 'findPage: a number for a cursor', act: ({ em }) => em.findPage('Thing', {}, { first: 2, after: 5 } as never), rejects: InvalidCursorError },
  { name: 'findBySql: no text', act: ({ em }) => em.findBySql('Thing', 42 as never), rejects: InvalidValueError },
  { name: 'findBySql: a NUL in the text', act: ({ em }) => em.findBySql('Thing', 'select * from thing where title = \'\0\''), rejects: InvalidValueError },
  { name: 'findBySql: params not an array', act: ({ em }) => em.findBySql('Thing', 'select * from thing where id = $1', 1 as never), rejects: InvalidValueError },
  { name: 'findBySql: NaN as a parameter', act: ({ em }) => em.findBySql('Thing', 'select * from thing where count = $1', [NaN]), rejects: InvalidValueError },
  { name: 'findBySql: a function as a parameter', act: ({ em }) => em.findBySql('Thing', 'select * from thing where title = $1', [() => 'x']), rejects: InvalidValueError },
  { name: 'query: an invalid Date as a parameter', act: ({ em }) => em.query('select $1::timestamptz', [new Date(NaN)]), rejects: InvalidValueError },
  { name: 'stream: a zero batch size', act: ({ em }) => em.stream('Thing', {}, { batchSize: 0 }).next(), rejects: InvalidValueError },
  { name: 'stream: a bad condition', act: ({ em }) => em.stream('Thing', { colour: 'red' } as never).next(), rejects: InvalidValueError },
  { name: 'populate: a path through a column', act: ({ em, home }) => em.populate(home, 'things.title' as never), rejects: InvalidValueError },
  { name: 'find: a negative offset', act: ({ em }) => em.find('Thing', {}, { offset: -1 }), rejects: InvalidValueError },
  { name: 'find: populate not an array', act: ({ em }) => em.find('Thing', {}, { populate: 'owner' } as never), rejects: InvalidValueError },
  { name: 'find: populate of an unknown path', act: ({ em }) => em.find('Thing', {}, { populate: ['owner.nope'] } as never), rejects: InvalidValueError },
  { name: 'findPage: populate not an array', act: ({ em }) => em.findPage('Thing', {}, { first: 2, populate: 'owner' } as never), rejects: InvalidValueError },
  { name: 'findPage: populate through a column', act: ({ em }) => em.findPage('Thing', {}, { first: 2, populate: ['title'] } as never), rejects: InvalidValueError },
]

const rejected: readonly (readonly [group: string, cases: readonly Rejected[]])[] = [
  ['values of the wrong type, out of range or not storable', valueCases],
  ['required values, ids and undefined', requiredCases],
  ['em.assign: all or nothing', assignCases],
  ['em.increment: counters only, deltas their column holds', incrementCases],
  ['em.upsert: a unique key, with its values', upsertCases],
  ['locking reads: options, and outside a transaction', lockCases],
  ['validation rules (.length(), .range())', ruleCases],
  ['unknown properties, names and relations', unknownPropertyCases],
  ['references and entity states', referenceCases],
  ['values changed in place', inPlaceCases],
  ['find() and findOne()', findCases],
  ['reads: where trees, counts, aggregates, pages, raw SQL, streams, populate paths', readCases],
]


// ---------------------------------------------------------------------------------------------
// Stored verbatim
// ---------------------------------------------------------------------------------------------

type Prop = 'title' | 'note' | 'short' | 'count' | 'big' | 'amount' | 'at' | 'doc' | 'ref' | 'mood'

interface Verbatim {
  readonly name: string
  readonly prop: Prop
  readonly value: () => unknown
  /** What reads back, when PostgreSQL writes the value in its canonical form (numeric `1e3` → `1000`). */
  readonly expected?: unknown
}

const injections = [
  "'); drop table thing; --",
  "Robert'); DROP TABLE owner;--",
  "' or '1'='1",
  '"; delete from thing where ""="',
  '$1 $2::text $$; drop table thing; $$ $tag$ x $tag$',
  "E'\\x27; drop table thing; --'",
  '/* comment */ select pg_sleep(10); --',
  'backslashes \\ \\\\ \\x00 \\u0000 \\0 as text',
  'array-literal breakers: {"a","b"}, NULL, \\" }{ ,',
  'NULL',
  '',
  ' \u2028\u2029\r\n\t\v\f ',
  'émoji 🚀, combining é, RTL \u202e override, BOM \ufeff, non-character \uffff, 𝕏',
]

/** Several megabytes of every awkward character above, to be stored byte for byte. */
function bigText(): string {
  const unit = injections.join('|') + '\n'
  return unit.repeat(Math.ceil(6_000_000 / unit.length))
}

const verbatim: readonly Verbatim[] = [
  ...injections.map((s, i): Verbatim => ({ name: `text #${i + 1}: ${JSON.stringify(s).slice(0, 40)}`, prop: 'note', value: () => s })),
  { name: 'SQL injection in a required text', prop: 'title', value: () => "x'); drop table thing; --" },
  { name: `a text of ${(bigText().length / 1e6).toFixed(1)} M characters`, prop: 'note', value: bigText },
  { name: 'five emoji in a .length({ max: 5 }) text', prop: 'short', value: () => '🚀'.repeat(5) },
  { name: 'SQL injection fitting a .length({ max: 5 })', prop: 'short', value: () => "';--" },
  {
    name: 'SQL injection in jsonb keys and values',
    prop: 'doc',
    value: () => ({ "'; drop table thing; --": '"); delete from owner; --', nested: ['$$', '\\', '"', 'NULL', null, '\\u0000'], n: -1.5 }),
  },
  { name: 'SQL injection as a jsonb string', prop: 'doc', value: () => "'; drop table thing; --" },
  { name: 'a literal backslash-u0000 (not a NUL) in jsonb', prop: 'doc', value: () => ({ s: '\\u0000', k: { '\\u0000': 'x' } }) },
  { name: 'emoji and surrogate pairs in jsonb', prop: 'doc', value: () => ({ '🚀': '𝕏 🚀', s: '\ud83d\ude80' }) },
  { name: 'extreme numbers in jsonb', prop: 'doc', value: () => ({ big: 1e308, tiny: 5e-324, max: Number.MAX_SAFE_INTEGER }) },
  { name: 'a numeric of 131072 integer digits (the maximum)', prop: 'amount', value: () => '9'.repeat(131072) },
  { name: 'a numeric of 16383 fraction digits (the maximum)', prop: 'amount', value: () => '0.' + '0'.repeat(16382) + '1' },
  { name: 'a numeric with 38 significant digits', prop: 'amount', value: () => '-12345678901234567890.123456789012345678' },
  { name: 'a numeric in exponent form', prop: 'amount', value: () => '1.5e3', expected: '1500' },
  { name: 'a JS number for numeric', prop: 'amount', value: () => 0.1, expected: '0.1' },
  { name: 'int4 maximum', prop: 'count', value: () => 2 ** 31 - 1 },
  { name: 'int4 minimum', prop: 'count', value: () => -(2 ** 31) },
  { name: 'int8 maximum', prop: 'big', value: () => 2n ** 63n - 1n },
  { name: 'int8 minimum', prop: 'big', value: () => -(2n ** 63n) },
  { name: 'the first millisecond of year 1', prop: 'at', value: () => new Date('0001-01-01T00:00:00.000Z') },
  { name: 'the last millisecond of year 9999', prop: 'at', value: () => new Date('9999-12-31T23:59:59.999Z') },
  { name: 'the nil UUID', prop: 'ref', value: () => '00000000-0000-0000-0000-000000000000' },
]

const columns: Record<Prop, string> = {
  title: 'title',
  note: 'note',
  short: 'short',
  count: 'count::text',
  big: 'big::text',
  amount: 'amount::text',
  at: `to_json("at") #>> '{}'`,
  doc: 'doc::text',
  ref: 'ref::text',
  mood: 'mood::text',
}

/** The row as raw SQL reads it, compared with what was written. */
async function expectRaw(prop: Prop, id: number, expected: unknown): Promise<void> {
  const [row] = await db.sql.unsafe(`select ${columns[prop]} as v from thing where id = $1`, [id])
  const raw = row!.v as string
  if (prop === 'doc') expect(JSON.parse(raw)).toEqual(expected)
  else if (prop === 'at') expect(new Date(raw).getTime()).toBe((expected as Date).getTime())
  else expect(raw === expected || raw === String(expected), `raw SQL read ${JSON.stringify(raw.slice(0, 80))}`).toBe(true)
}

async function runVerbatim(c: Verbatim): Promise<void> {
  tried++
  const start = await counts()
  const expected = 'expected' in c ? c.expected : c.value()
  const title = `verbatim ${tried}`
  const em = db.orm.em()
  const made = em.create('Thing', { title, owner: em.ref('Owner', ids.home), [c.prop]: c.value() } as never)
  await em.flush()
  expect(await counts()).toEqual(plus(start, { thing: 1 }))

  const back = await db.orm.em().load('Thing', made.id)
  expect(back[c.prop], 'read back through a fresh EntityManager').toEqual(expected)
  await expectRaw(c.prop, made.id, expected)

  // The same value through an UPDATE.
  const em2 = db.orm.em()
  const target = await em2.load('Thing', ids.target)
  set(target, c.prop, c.value())
  await em2.flush()
  expect((await db.orm.em().load('Thing', ids.target))[c.prop]).toEqual(expected)
  await expectRaw(c.prop, ids.target, expected)

  // Text is found by its exact value, whatever it holds.
  if (c.prop === 'note' || c.prop === 'short' || c.prop === 'title') {
    const value = c.value() as string
    const em3 = db.orm.em()
    // Among the new row, the updated one and the fixture (which holds something else).
    const found = async (condition: unknown) =>
      (await em3.find('Thing', { [c.prop]: condition, id: { in: [made.id, ids.target, ids.thing] } } as never, { orderBy: { id: 'asc' } })).map((x) => x.id)
    const both = [made.id, ids.target].sort((a, b) => a - b)
    expect(await found(value), 'eq').toEqual(both)
    expect(await found({ in: [value, 'something else'] }), 'in').toEqual(both)
    expect(await found({ ne: value }), 'ne').toEqual(c.prop === 'title' ? [ids.thing] : [])
  }
  expect(await counts()).toEqual(plus(start, { thing: 1 }))
}


// ---------------------------------------------------------------------------------------------
// Matched literally: injections as find() values return what equality on the text says
// ---------------------------------------------------------------------------------------------

interface Literal {
  readonly name: string
  readonly find: (em: Em) => Promise<unknown>
  readonly expected: (em: Em) => Promise<unknown>
}

const literal: readonly Literal[] = [
  { name: "find where: ' or '1'='1 as a text value", find: (em) => em.find('Thing', { title: "' or '1'='1" }), expected: async () => [] },
  { name: 'find where: an injection in a like pattern', find: (em) => em.find('Thing', { title: { like: "%' or 1=1 --" } }), expected: async () => [] },
  { name: 'find where: array-literal breakers in in', find: (em) => em.find('Thing', { title: { in: ['fixture","update target', '"}', 'NULL', '{}'] } }), expected: async () => [] },
  {
    name: "find where: ne with an injection matches every other row",
    find: async (em) => (await em.find('Owner', { name: { ne: "' or 1=1 --" } })).length,
    expected: async () => (await counts()).owner,
  },
  { name: "findOne where: an injection closing the quote", find: (em) => em.findOne('Thing', { title: "fixture' --" }), expected: async () => undefined },
  { name: 'findOne where: the fixture title, literally', find: async (em) => (await em.findOne('Thing', { title: 'fixture' }))?.id, expected: async () => ids.thing },
]

// Every case, once per executor: each on a fresh schema, so the row counts start from the fixtures.
describe.each(ALL_EXECUTORS)('%s', (executor) => {
  beforeAll(async () => {
    tried = 0
    db = await testDatabase(schema, { name: 'badinput', executor })
    const em = db.orm.em()
    const home = em.create('Owner', { name: 'home' })
    const thing = em.create('Thing', { title: 'fixture', owner: home, at: new Date(FIXTURE_AT), doc: { a: 1 } })
    // What the stored-verbatim cases overwrite, so the rejected cases' fixture stays as it is.
    const target = em.create('Thing', { title: 'update target', owner: home })
    const tag = em.create('Tag', { name: 'fixture tag' })
    await em.flush()
    Object.assign(ids, { home: home.id, thing: thing.id, target: target.id, tag: tag.id })
  })
  afterAll(async () => {
    console.log(`bad inputs tried through ${executor}:`, tried)
    await db?.close()
  })

  for (const [group, cases] of rejected) {
    describe(`rejected: ${group}`, () => {
      for (const c of cases) it(c.name, () => runRejected(c))
    })
  }

  describe('stored verbatim', () => {
    for (const c of verbatim) it(c.name, () => runVerbatim(c))
  })

  describe('matched literally', () => {
    for (const c of literal) {
      it(c.name, async () => {
        tried++
        const em = db.orm.em()
        expect(await c.find(em)).toEqual(await c.expected(em))
      })
    }
  })

  describe('after every bad input', () => {
    it('every table and type still exists, with exactly the rows the cases wrote', async () => {
      const [row] = await db.sql.unsafe(
        `select ${TABLES.map((name) => `to_regclass('"${name}"') is not null as "${name}"`).join(', ')}, to_regtype('mood') is not null as mood`,
      )
      expect(row).toEqual({ ...Object.fromEntries(TABLES.map((name) => [name, true])), mood: true })
      const rejectedCount = rejected.reduce((n, [, cases]) => n + cases.length, 0)
      const repaired = rejected.flatMap(([, cases]) => cases).reduce((n, c) => n + (c.delta?.thing ?? 0), 0)
      const rows = await counts()
      // Fixtures (1 owner, 2 things, 1 tag), one owner per rejected case, a thing per verbatim case.
      expect(rows).toEqual({
        owner: 1 + rejectedCount + rejected.flatMap(([, cases]) => cases).reduce((n, c) => n + (c.delta?.owner ?? 0), 0),
        thing: 2 + repaired + verbatim.length,
        tag: 1,
        code: 0,
        thing_tag: 0,
      })
      const [fixture] = await db.sql`select title, at, doc from thing where id = ${ids.thing}`
      expect(fixture).toEqual({ title: 'fixture', at: FIXTURE_AT, doc: { a: 1 } })
    })
  })
})
