import { snakeCase } from '../schema/naming.js'
import type { CatalogColumn, CatalogForeignKey, CatalogTable } from './pull-read.js'
import { defaultSource, pulledType, quote } from './pull-types.js'

export interface GenerateOptions {
  /** Where the tables came from, for the header. */
  readonly source: string
  /** An int4 column of this name becomes the entity's optimistic-lock `t.version()`. */
  readonly versionColumn?: string | undefined
}

/**
 * A `defineSchema` module for the tables read by pull-read.ts: entities with their columns (typed by
 * pull-types.ts), ids, uniques, defaults it can carry, many-to-one references with their one-to-many
 * inverses, and pure join tables as many-to-many. What it cannot express is listed in a comment at
 * the top, by table and column, never dropped silently. Pure: the same catalog gives the same text.
 */
export function generateSchemaModule(tables: readonly CatalogTable[], options: GenerateOptions): string {
  const unsupported: string[] = []
  const joins = tables.filter(isJoinTable)
  const entities = tables.filter((t) => !joins.includes(t))
  const names = new Map<string, string>() // table → entity name
  for (const table of entities) {
    if (table.primaryKey.length !== 1) {
      unsupported.push(`${table.name}: ${table.primaryKey.length === 0 ? 'no primary key' : `a composite primary key (${table.primaryKey.join(', ')})`}; not generated`)
      continue
    }
    names.set(table.name, entityName(table.name))
  }
  const props = new Map<string, string[]>([...names.keys()].map((t) => [t, []]))
  const used = new Map<string, Set<string>>([...names.keys()].map((t) => [t, new Set()]))
  const claim = (table: string, wanted: string): string => {
    const taken = used.get(table)!
    let name = wanted
    for (let i = 2; taken.has(name); i++) name = `${wanted}${i}`
    taken.add(name)
    return name
  }

  /** The many-to-one properties written, for their one-to-many inverses. */
  const manyToOnes: { table: string; prop: string; target: string }[] = []
  /** Each table's generated property by column, for its unique keys over several columns. */
  const propOf = new Map<string, Map<string, string>>()
  const keys = new Map<string, string>() // table → `{ unique: [...] }`
  for (const table of entities.filter((t) => names.has(t.name))) {
    const lines = props.get(table.name)!
    const byColumn = new Map<string, string>()
    propOf.set(table.name, byColumn)
    const references = new Map(table.foreignKeys.map((fk) => [fk.column, fk]))
    for (const composite of table.compositeForeignKeys) unsupported.push(`${table.name} (${composite}): a multi-column foreign key; its columns are plain columns here`)
    for (const column of table.columns) {
      const at = `${table.name}.${column.name}`
      if (column.name === table.primaryKey[0]) {
        const id = idBuilder(column)
        if (!id) {
          unsupported.push(`${at}: a ${column.type} primary key (Flushwave ids are int8 or uuid); not generated`)
          continue
        }
        if (column.type === 'integer') unsupported.push(`${at}: integer, while t.id() is int8: \`alter table … alter column … type bigint\` (checkSchema reports it until then)`)
        const prop = claim(table.name, camelCase(column.name))
        lines.push(`${prop}: ${id}${prop === column.name ? '' : columnOverride(prop, column.name)},`)
        continue
      }
      const fk = references.get(column.name)
      if (fk && names.has(fk.target)) {
        const prop = claim(table.name, camelCase(column.name.replace(/_id$/, '')) || camelCase(column.name))
        lines.push(`${prop}: ${manyToOne(fk, column, prop, names.get(fk.target)!, idColumnOf(tables, fk.target))},`)
        manyToOnes.push({ table: table.name, prop, target: fk.target })
        byColumn.set(column.name, prop)
        continue
      }
      const version = column.name === options.versionColumn && column.typeName === 'int4'
      const pulled = version ? undefined : pulledType(column)
      if (typeof pulled === 'string') {
        unsupported.push(`${at}: ${pulled}`)
        continue
      }
      const prop = claim(table.name, camelCase(column.name))
      let text = pulled?.builder ?? 't.version()'
      if (pulled) {
        if (pulled.precision) unsupported.push(`${at}: the precision of ${column.type}, which ${pulled.builder} does not carry (the server rounds values to it)`)
        const def = defaultSource(column, pulled)
        if (def) text += def
        else if (column.default !== undefined && !column.sequence) unsupported.push(`${at}: default ${column.default} is not carried over (Flushwave sends every value)`)
        if (!column.notNull) text += '.nullable()'
        if (table.unique.has(column.name)) text += '.unique()'
      }
      if (snakeCase(prop) !== column.name) text += `.column(${quote(column.name)})`
      lines.push(`${prop}: ${text},`)
      byColumn.set(column.name, prop)
    }
    const written: string[] = []
    for (const key of table.uniqueKeys ?? []) {
      const missing = key.filter((c) => !byColumn.has(c))
      if (missing.length > 0) unsupported.push(`${table.name} (${key.join(', ')}): a unique key over a column not generated (${missing.join(', ')}); not generated`)
      else written.push(`[${key.map((c) => quote(byColumn.get(c)!)).join(', ')}]`)
    }
    if (written.length > 0) keys.set(table.name, `, { unique: [${written.join(', ')}] }`)
  }

  // One-to-many inverses of the references, on their targets.
  for (const { table, prop, target } of manyToOnes) {
    const wanted = camelCase(plural(table))
    const collection = claim(target, used.get(target)!.has(wanted) ? `${wanted}By${pascalCase(prop)}` : wanted)
    props.get(target)!.push(`${collection}: t.oneToMany(${quote(names.get(table)!)}, ${quote(prop)}),`)
  }

  // Pure join tables: a many-to-many on the entity of their first column.
  for (const join of joins) {
    // The owner is the entity of the table's first column.
    const position = (fk: CatalogForeignKey) => join.columns.findIndex((c) => c.name === fk.column)
    const [own, other] = [...join.foreignKeys].sort((a, b) => position(a) - position(b)) as [CatalogForeignKey, CatalogForeignKey]
    if (!names.has(own.target) || !names.has(other.target)) {
      unsupported.push(`${join.name}: a join table whose targets are not generated; not generated`)
      continue
    }
    const settings: string[] = []
    if (join.name !== `${own.target}_${other.target}`) settings.push(`table: ${quote(join.name)}`)
    if (own.column !== `${own.target}_${idColumnOf(tables, own.target)}`) settings.push(`ownColumn: ${quote(own.column)}`)
    if (other.column !== `${other.target}_${idColumnOf(tables, other.target)}`) settings.push(`targetColumn: ${quote(other.column)}`)
    const prop = claim(own.target, camelCase(plural(other.target)))
    props.get(own.target)!.push(`${prop}: t.manyToMany(${quote(names.get(other.target)!)}${settings.length ? `, { ${settings.join(', ')} }` : ''}),`)
  }

  const header = [
    `// Generated by \`flushwave pull\` from ${options.source}. Edit freely; \`orm.checkSchema()\` compares it with the database.`,
    ...(unsupported.length ? ['//', '// Not in this schema:', ...unsupported.map((u) => `//   ${u}`)] : []),
  ]
  const body = [...names].map(([table, name]) => `  ${name}: entity(${quote(table)}, {\n${props.get(table)!.map((l) => `    ${l}`).join('\n')}\n  }${keys.get(table) ?? ''}),`)
  return `${header.join('\n')}\nimport { defineSchema, entity, t } from 'flushwave'\n\nexport const schema = defineSchema({\n${body.join('\n')}\n})\n`
}

/** Two columns, both not-null single-column foreign keys, together the primary key (or with no key at all). */
function isJoinTable(table: CatalogTable): boolean {
  if (table.columns.length !== 2 || table.foreignKeys.length !== 2) return false
  const columns = table.columns.map((c) => c.name)
  if (!table.columns.every((c) => c.notNull) || !table.foreignKeys.every((fk) => columns.includes(fk.column))) return false
  return table.primaryKey.length === 0 || (table.primaryKey.length === 2 && columns.every((c) => table.primaryKey.includes(c)))
}

function idBuilder(column: CatalogColumn): string | undefined {
  if (column.typeName === 'uuid') return 't.uuidId()'
  if (column.typeName !== 'int8' && column.typeName !== 'int4') return undefined
  return column.sequence ? 't.id()' : 't.providedId()'
}

function idColumnOf(tables: readonly CatalogTable[], table: string): string {
  return tables.find((t) => t.name === table)?.primaryKey[0] ?? 'id'
}

function manyToOne(fk: CatalogForeignKey, column: CatalogColumn, prop: string, target: string, targetId: string): string {
  let text = `t.manyToOne(${quote(target)})`
  if (!column.notNull) text += '.nullable()'
  if (fk.onDelete === 'cascade' || fk.onDelete === 'set null') text += `.onDelete(${quote(fk.onDelete)})`
  if (fk.deferred) text += '.deferrable()'
  if (column.name !== `${snakeCase(prop)}_${targetId}`) text += `.column(${quote(column.name)})`
  return text
}

function columnOverride(prop: string, column: string): string {
  return snakeCase(prop) === column ? '' : `.column(${quote(column)})`
}

const words = (s: string): string[] => s.split(/[^A-Za-z0-9]+/).filter(Boolean)
const pascalCase = (s: string): string => words(s).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')
const camelCase = (s: string): string => {
  const p = pascalCase(s)
  const c = p.length ? p[0]!.toLowerCase() + p.slice(1) : p
  return /^[0-9]/.test(c) ? `_${c}` : c
}
const entityName = (table: string): string => {
  const name = pascalCase(table)
  return /^[0-9]/.test(name) ? `T${name}` : name
}
/** English plural for collection names: book → books, category → categories, box → boxes. */
const plural = (s: string): string => (/[^aeiou]y$/.test(s) ? `${s.slice(0, -1)}ies` : /(s|x|z|ch|sh)$/.test(s) ? `${s}es` : `${s}s`)
