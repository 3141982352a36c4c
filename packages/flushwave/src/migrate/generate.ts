import { diffModels, EMPTY_MODEL, type Renames, type Step } from '../catalog/diff.js'
import type { DbModel } from '../catalog/model.js'
import { MigrationError } from '../errors.js'
import { quoteIdent } from '../schema/quote.js'
import { timestamp, writeKnexMigration, writeMigration, type Migration } from './files.js'

/**
 * `migrate generate`: the statements from the model the last migration left (its snapshot; an
 * empty database before the first) to the schema's, and back. Destructive ones are refused unless
 * allowed; renames are only those given (`--rename`), never guessed.
 */
export interface Generated {
  readonly id: string
  readonly up: readonly Step[]
  readonly down: readonly Step[]
}

export function plan(migrations: readonly Migration[], next: DbModel, renames: Renames = {}): { up: Step[]; down: Step[] } {
  const previous = lastSnapshot(migrations)
  return { up: diffModels(previous, next, renames), down: diffModels(next, previous, reversed(renames)) }
}

/** Writes the migration `<timestamp>_<name>` into `dir`; undefined when the schema and the migrations agree. */
export async function generate(
  dir: string,
  migrations: readonly Migration[],
  next: DbModel,
  options: { readonly name: string; readonly renames?: Renames; readonly allowDestructive?: boolean; readonly now?: Date; readonly knex?: boolean },
): Promise<Generated | undefined> {
  if (!/^[a-z0-9_]+$/i.test(options.name)) throw new MigrationError(options.name, undefined, `a migration's name is letters, digits and underscores: ${JSON.stringify(options.name)}`)
  const { up, down } = plan(migrations, next, options.renames)
  if (up.length === 0) return undefined
  const destructive = up.filter((s) => s.destructive)
  if (destructive.length > 0 && !options.allowDestructive) {
    const list = destructive.map((s) => `  - ${s.sql}\n    (${s.destructive})`).join('\n')
    throw new MigrationError(options.name, destructive[0]!.sql, `the migration would lose data or may fail on existing rows; if that is meant, generate it again with --allow-destructive (a column or table renamed, not dropped: --rename):\n${list}`)
  }
  let stamp = timestamp(options.now ?? new Date())
  // Ids sort by time: never before the last one (two generated within a second, a clock behind).
  const last = migrations.at(-1)?.id.slice(0, 14)
  if (last !== undefined && stamp <= last) stamp = String(BigInt(last) + 1n)
  const id = `${stamp}_${options.name}`
  await (options.knex ? writeKnexMigration : writeMigration)(dir, id, up, down, next)
  return { id, up, down }
}

/** The model the last migration leaves (an empty database before the first). */
export function lastSnapshot(migrations: readonly Migration[]): DbModel {
  const last = migrations.at(-1)
  if (last === undefined) return EMPTY_MODEL
  if (last.snapshot === undefined) throw new MigrationError(last.id, undefined, `migration ${last.id} has no snapshot.json: the next one cannot be generated from it`)
  return last.snapshot
}

/**
 * `--rename` values: `table=new` for a table (`schema.table=new` in a PostgreSQL schema), and
 * `table.column=new` for a column (of the table's new name).
 */
export function parseRenames(values: readonly string[], known: DbModel): Renames {
  const tables = new Map<string, string>()
  const columns = new Map<string, Map<string, string>>()
  const names = new Set(known.tables.map((t) => t.name))
  for (const value of values) {
    const match = /^([^=]+)=([^=.]+)$/.exec(value)
    if (!match) throw new MigrationError('rename', undefined, `--rename takes table=new or table.column=new, got ${JSON.stringify(value)}`)
    const [, left, to] = match as unknown as [string, string, string]
    const parts = left.split('.')
    const asTable = parts.map(quoteIdent).join('.')
    if (names.has(asTable)) {
      tables.set(asTable, [...parts.slice(0, -1), to].map(quoteIdent).join('.'))
      continue
    }
    const table = parts.slice(0, -1).map(quoteIdent).join('.')
    const column = parts.at(-1)!
    const renamedTable = tables.get(table) ?? table
    if (parts.length < 2) throw new MigrationError('rename', undefined, `--rename ${value}: no table ${left} in the last migration's snapshot`)
    let map = columns.get(renamedTable)
    if (!map) columns.set(renamedTable, (map = new Map()))
    map.set(column, to)
  }
  return { tables, columns }
}

/** Asks a yes-or-no question (the command's, in a terminal: readline). */
export type Ask = (question: string) => Promise<boolean>

/**
 * Renames asked for, in a terminal, where the diff would drop one table and create another (in the
 * same PostgreSQL schema), or drop a column and add one of the same type to a table: "was it
 * renamed?". Each yes joins the renames given; a no leaves the drop and the create (which a
 * destructive step then needs --allow-destructive for).
 */
export async function askRenames(migrations: readonly Migration[], next: DbModel, given: Renames, ask: Ask): Promise<Renames> {
  const previous = lastSnapshot(migrations)
  const tables = new Map(given.tables ?? [])
  const columns = new Map([...(given.columns ?? [])].map(([table, map]) => [table, new Map(map)]))
  const schemaOf = (name: string) => name.slice(0, name.lastIndexOf('"."') + 1)
  const nextNames = new Set(next.tables.map((t) => t.name))
  const renamedTo = new Set(tables.values())
  for (const old of previous.tables) {
    if (tables.has(old.name) || nextNames.has(old.name)) continue
    const candidates = next.tables.filter((t) => !previous.tables.some((p) => p.name === t.name) && !renamedTo.has(t.name) && schemaOf(t.name) === schemaOf(old.name))
    for (const candidate of candidates) {
      if (!(await ask(`Was table ${old.name} renamed to ${candidate.name}?`))) continue
      tables.set(old.name, candidate.name)
      renamedTo.add(candidate.name)
      break
    }
  }
  for (const old of previous.tables) {
    const name = tables.get(old.name) ?? old.name
    const now = next.tables.find((t) => t.name === name)
    if (!now) continue
    const map = columns.get(name) ?? new Map<string, string>()
    const taken = new Set(map.values())
    for (const column of old.columns) {
      if (map.has(column.name) || now.columns.some((c) => c.name === column.name)) continue
      const candidates = now.columns.filter((c) => c.type === column.type && !old.columns.some((o) => o.name === c.name) && !taken.has(c.name))
      for (const candidate of candidates) {
        if (!(await ask(`Was column ${column.name} of ${name} renamed to ${candidate.name}?`))) continue
        map.set(column.name, candidate.name)
        taken.add(candidate.name)
        break
      }
    }
    if (map.size > 0) columns.set(name, map)
  }
  return { tables, columns }
}

/** The renames the other way, for `down`. */
export function reversed(renames: Renames): Renames {
  const tables = new Map([...(renames.tables ?? [])].map(([from, to]) => [to, from]))
  const columns = new Map(
    [...(renames.columns ?? [])].map(([table, map]) => [tables.get(table) ?? table, new Map([...map].map(([from, to]) => [to, from]))]),
  )
  return { tables, columns }
}
