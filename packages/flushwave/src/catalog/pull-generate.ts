import { KEY_COLUMN_TYPES } from '../schema/builders.js'
import { snakeCase } from '../schema/naming.js'
import type { CatalogColumn, CatalogForeignKey, CatalogTable } from './pull-read.js'
import { defaultSource, pulledType, quote } from './pull-types.js'

export interface GenerateOptions {
  /** Where the tables came from, for the header. */
  readonly source: string
  /** An int4 column of this name becomes the entity's optimistic-lock `t.version()`. */
  readonly versionColumn?: string | undefined
  /**
   * The PostgreSQL schema whose tables and enum types the module names without a schema, for the
   * connection's search path to find (`flushwave pull` passes the first of `--schema`); those of
   * every other schema get `{ schema: '…' }`. Default: the schema of the first table.
   */
  readonly defaultSchema?: string | undefined
}

/** A table's identity across schemas. */
const keyOf = (schema: string, name: string): string => `${schema}\0${name}`

/**
 * A `defineSchema` module for the tables read by pull-read.ts: entities with their columns (typed by
 * pull-types.ts), ids, uniques, defaults it can carry, many-to-one references with their one-to-many
 * inverses, and pure join tables as many-to-many, from one PostgreSQL schema or several. What it
 * cannot express is listed in a comment at the top, by table and column, never dropped silently.
 * Pure: the same catalog gives the same text.
 */
export function generateSchemaModule(tables: readonly CatalogTable[], options: GenerateOptions): string {
  const unsupported: string[] = []
  const defaultSchema = options.defaultSchema ?? tables[0]?.schema
  const byKey = new Map(tables.map((t) => [keyOf(t.schema, t.name), t]))
  /** A table as the list at the top names it: with its schema when that is not the default one. */
  const label = (schema: string, name: string): string => (schema === defaultSchema ? name : `${schema}.${name}`)
  const joins = tables.filter(isJoinTable)
  const ids = new Map<string, string>() // table → its id property's builder, or COMPOSITE
  const composite: CatalogTable[] = []
  for (const table of tables.filter((t) => !joins.includes(t))) {
    if (table.primaryKey.length !== 1) {
      if (table.primaryKey.length === 0) unsupported.push(`${label(table.schema, table.name)}: no primary key; not generated`)
      else composite.push(table)
      continue
    }
    const key = keyColumn(table)!
    const id = idBuilder(key, defaultSchema)
    if (id) ids.set(keyOf(table.schema, table.name), id)
    else unsupported.push(`${label(table.schema, table.name)}.${key.name}: a ${key.type} primary key (keys are int2, int4, int8, text, varchar, char(n) or uuid); not generated`)
  }
  // A composite key's columns are plain columns of a key type, or references to tables with an id of their own.
  for (const table of composite) {
    const references = new Map(table.foreignKeys.map((fk) => [fk.column, fk]))
    const unfit = table.primaryKey.filter((name) => {
      const column = table.columns.find((c) => c.name === name)!
      const fk = references.get(name)
      const target = fk && keyOf(fk.targetSchema, fk.target)
      if (target && ids.has(target) && ids.get(target) !== COMPOSITE) return false
      return column.generated || column.elementTypeName !== undefined || !(KEY_COLUMN_TYPES.includes(column.typeName) || column.enumValues)
    })
    if (unfit.length === 0) ids.set(keyOf(table.schema, table.name), COMPOSITE)
    else unsupported.push(`${label(table.schema, table.name)}: a composite primary key (${table.primaryKey.join(', ')}) over ${unfit.join(', ')}, which a key cannot hold (a key part is int2, int4, int8, text, varchar, char(n), uuid, an enum or a reference); not generated`)
  }
  const entities = tables.filter((t) => ids.has(keyOf(t.schema, t.name)))
  const names = entityNames(entities, defaultSchema) // table → entity name
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
  const manyToOnes: { table: CatalogTable; prop: string; target: string }[] = []
  const entityOptions = new Map<string, string>() // table → `, { schema: …, unique: [...] }`
  for (const table of entities) {
    const self = keyOf(table.schema, table.name)
    const tableLabel = label(table.schema, table.name)
    const lines = props.get(self)!
    const byColumn = new Map<string, string>()
    const references = new Map(table.foreignKeys.map((fk) => [fk.column, fk]))
    for (const composite of table.compositeForeignKeys) unsupported.push(`${tableLabel} (${composite}): a multi-column foreign key; its columns are plain columns here`)
    // A plain column's own index and check, as .index() and .checkSql() (named as those name them).
    const isReference = (column: string) => {
      const fk = references.get(column)
      const target = fk && keyOf(fk.targetSchema, fk.target)
      return target !== undefined && names.has(target) && ids.get(target) !== COMPOSITE
    }
    const ownIndex = new Set((table.indexes ?? []).filter((i) => i.columns.length === 1 && !i.unique && i.where === undefined && i.name === `${table.name}_${i.columns[0]}_idx`).map((i) => i.columns[0]!))
    const ownCheck = new Map((table.checks ?? []).filter((c) => c.columns.length === 1 && c.name === `${table.name}_${c.columns[0]}_check` && !isReference(c.columns[0]!)).map((c) => [c.columns[0]!, c]))
    for (const column of table.columns) {
      const at = `${tableLabel}.${column.name}`
      if (column.identityAlways) unsupported.push(`${at}: GENERATED ALWAYS AS IDENTITY refuses the values Flushwave inserts: \`alter table … alter column … set generated by default\``)
      if (column.name === table.primaryKey[0] && table.primaryKey.length === 1) {
        const id = ids.get(self)!
        if (id.startsWith('t.providedId(') && column.default !== undefined && !column.sequence) unsupported.push(`${at}: default ${column.default} is not carried over (create takes a t.providedId() key)`)
        const prop = claim(self, camelCase(column.name))
        lines.push(`${prop}: ${id}${columnOverride(prop, column.name)},`)
        continue
      }
      const fk = references.get(column.name)
      const target = fk && keyOf(fk.targetSchema, fk.target)
      if (fk && target && names.has(target) && ids.get(target) !== COMPOSITE) {
        const targetKey = keyColumn(byKey.get(target)!)!
        if (targetKey.type !== column.type) unsupported.push(`${at}: type ${column.type}, while the key it references (${label(fk.targetSchema, fk.target)}.${targetKey.name}) is ${targetKey.type}: a reference has its target key's type`)
        const stem = column.name.endsWith(`_${targetKey.name}`) ? column.name.slice(0, -targetKey.name.length - 1) : column.name.replace(/_id$/, '')
        const prop = claim(self, camelCase(stem) || camelCase(column.name))
        lines.push(`${prop}: ${manyToOne(fk, column, prop, names.get(target)!, targetKey.name)},`)
        manyToOnes.push({ table, prop, target })
        byColumn.set(column.name, prop)
        continue
      }
      if (fk) unsupported.push(`${at}: references ${label(fk.targetSchema, fk.target)}, which ${names.has(target!) ? 'has a composite primary key' : 'has no entity here'}; a plain column`)
      const version = column.name === options.versionColumn && column.typeName === 'int4'
      const pulled = version ? undefined : pulledType(column, defaultSchema)
      if (typeof pulled === 'string') {
        unsupported.push(`${at}: ${pulled}`)
        continue
      }
      const prop = claim(self, camelCase(column.name))
      let text = pulled?.builder ?? 't.version()'
      if (pulled) {
        if (pulled.precision) unsupported.push(`${at}: the precision of ${column.type}, which ${pulled.builder} does not carry (the server rounds values to it)`)
        // A default Flushwave cannot write as a value (an expression, a sequence) is left to the
        // server; a generated column is never written. Both are read back by the insert.
        const def = column.generated ? undefined : defaultSource(column, pulled)
        // A part of a composite key is given by create: a default the server computes is not carried over.
        const keyPart = table.primaryKey.length > 1 && table.primaryKey.includes(column.name)
        if (def) text += def
        else if (column.default !== undefined && keyPart) unsupported.push(`${at}: default ${column.default} is not carried over (create gives a key's values)`)
        else if (column.default !== undefined && !column.generated) text += `.serverDefault(${quote(column.default)})`
        if (!column.notNull) text += '.nullable()'
        if (table.unique.has(column.name)) text += '.unique()'
        if (column.generated) text += `.generated(${quote(column.default ?? '')})`
        if (ownIndex.has(column.name)) text += '.index()'
        const check = ownCheck.get(column.name)
        if (check) text += `.checkSql(${quote(check.sql)})`
      }
      text += columnOverride(prop, column.name)
      lines.push(`${prop}: ${text},`)
      byColumn.set(column.name, prop)
    }
    const settings = table.schema === defaultSchema ? [] : [`schema: ${quote(table.schema)}`]
    if (ids.get(self) === COMPOSITE) settings.push(`primaryKey: [${table.primaryKey.map((c) => quote(byColumn.get(c)!)).join(', ')}]`)
    const written: string[] = []
    for (const key of table.uniqueKeys ?? []) {
      const missing = key.filter((c) => !byColumn.has(c))
      if (missing.length > 0) unsupported.push(`${tableLabel} (${key.join(', ')}): a unique key over a column not generated (${missing.join(', ')}); not generated`)
      else written.push(`[${key.map((c) => quote(byColumn.get(c)!)).join(', ')}]`)
    }
    if (written.length > 0) settings.push(`unique: [${written.join(', ')}]`)
    const indexes: string[] = []
    for (const index of table.indexes ?? []) {
      const missing = index.columns.filter((c) => !byColumn.has(c))
      if (missing.length > 0) {
        unsupported.push(`${tableLabel}: index ${index.name} is over a column not generated (${missing.join(', ')}); not generated`)
        continue
      }
      const [first] = index.columns
      const plain = index.columns.length === 1 && !index.unique && index.where === undefined && index.name === `${table.name}_${first}_idx`
      // A reference's own index is one Flushwave makes itself; a plain column's is its .index().
      if (plain && (isReference(first!) || ownIndex.has(first!))) continue
      const parts = [`on: [${index.columns.map((c) => quote(byColumn.get(c)!)).join(', ')}]`]
      if (index.unique) parts.push('unique: true')
      if (index.where !== undefined) parts.push(`where: ${quote(index.where)}`)
      if (index.name !== `${table.name}_${index.columns.join('_')}_idx`) parts.push(`name: ${quote(index.name)}`)
      indexes.push(`{ ${parts.join(', ')} }`)
    }
    for (const name of table.expressionIndexes ?? []) unsupported.push(`${tableLabel}: index ${name} is over an expression; not generated`)
    if (indexes.length > 0) settings.push(`indexes: [${indexes.join(', ')}]`)
    const checks: string[] = []
    for (const check of table.checks ?? []) {
      const missing = check.columns.filter((c) => !byColumn.has(c))
      if (missing.length > 0) {
        unsupported.push(`${tableLabel}: check ${check.name} reads a column not generated (${missing.join(', ')}); not generated`)
        continue
      }
      if (check.columns.length === 1 && ownCheck.get(check.columns[0]!) === check) continue
      checks.push(`${/^[A-Za-z_$][\w$]*$/.test(check.name) ? check.name : quote(check.name)}: ${quote(check.sql)}`)
    }
    if (checks.length > 0) settings.push(`checks: { ${checks.join(', ')} }`)
    if (settings.length > 0) entityOptions.set(self, `, { ${settings.join(', ')} }`)
  }

  // One-to-many inverses of the references, on their targets.
  for (const { table, prop, target } of manyToOnes) {
    const wanted = camelCase(plural(table.name))
    const collection = claim(target, used.get(target)!.has(wanted) ? `${wanted}By${pascalCase(prop)}` : wanted)
    props.get(target)!.push(`${collection}: t.oneToMany(${quote(names.get(keyOf(table.schema, table.name))!)}, ${quote(prop)}),`)
  }

  // Pure join tables: a many-to-many on the entity of their first column (Flushwave keeps a join
  // table in its owner's schema: of their second, when only that one's table is in the join table's).
  for (const join of joins) {
    const position = (fk: CatalogForeignKey) => join.columns.findIndex((c) => c.name === fk.column)
    let [own, other] = [...join.foreignKeys].sort((a, b) => position(a) - position(b)) as [CatalogForeignKey, CatalogForeignKey]
    if (own.targetSchema !== join.schema && other.targetSchema === join.schema) [own, other] = [other, own]
    const [owner, target] = [keyOf(own.targetSchema, own.target), keyOf(other.targetSchema, other.target)]
    if (!names.has(owner) || !names.has(target)) {
      unsupported.push(`${label(join.schema, join.name)}: a join table whose targets are not generated; not generated`)
      continue
    }
    if (own.targetSchema !== join.schema) {
      unsupported.push(`${label(join.schema, join.name)}: a join table in a schema neither of its tables is in (Flushwave keeps it in its owner's); not generated`)
      continue
    }
    const settings: string[] = []
    if (join.name !== `${own.target}_${other.target}`) settings.push(`table: ${quote(join.name)}`)
    if (own.column !== `${own.target}_${keyColumn(byKey.get(owner)!)!.name}`) settings.push(`ownColumn: ${quote(own.column)}`)
    if (other.column !== `${other.target}_${keyColumn(byKey.get(target)!)!.name}`) settings.push(`targetColumn: ${quote(other.column)}`)
    const prop = claim(owner, camelCase(plural(other.target)))
    props.get(owner)!.push(`${prop}: t.manyToMany(${quote(names.get(target)!)}${settings.length ? `, { ${settings.join(', ')} }` : ''}),`)
  }

  const header = [
    `// Generated by \`flushwave pull\` from ${options.source}. Edit freely; \`orm.checkSchema()\` compares it with the database.`,
    ...(unsupported.length ? ['//', '// Not in this schema:', ...unsupported.map((u) => `//   ${u}`)] : []),
  ]
  const body = entities.map((table) => {
    const key = keyOf(table.schema, table.name)
    return `  ${names.get(key)!}: entity(${quote(table.name)}, {\n${props.get(key)!.map((l) => `    ${l}`).join('\n')}\n  }${entityOptions.get(key) ?? ''}),`
  })
  return `${header.join('\n')}\nimport { defineSchema, entity, t } from 'flushwave'\n\nexport const schema = defineSchema({\n${body.join('\n')}\n})\n`
}

/** Two columns, both not-null single-column foreign keys, together the primary key (or with no key at all). */
function isJoinTable(table: CatalogTable): boolean {
  if (table.columns.length !== 2 || table.foreignKeys.length !== 2) return false
  const columns = table.columns.map((c) => c.name)
  if (!table.columns.every((c) => c.notNull) || !table.foreignKeys.every((fk) => columns.includes(fk.column))) return false
  return table.primaryKey.length === 0 || (table.primaryKey.length === 2 && columns.every((c) => table.primaryKey.includes(c)))
}

/** The column of a table's single-column primary key. */
function keyColumn(table: CatalogTable): CatalogColumn | undefined {
  return table.primaryKey.length === 1 ? table.columns.find((c) => c.name === table.primaryKey[0]) : undefined
}

/** What `ids` holds for a table with a composite primary key: no id property, `{ primaryKey }`. */
const COMPOSITE = 'primaryKey'

/** The builders `t.id(type)` takes for a key from a sequence (identity or serial); int8 is t.id()'s own. */
const SEQUENCE_IDS: Readonly<Record<string, string>> = { int8: 't.id()', int4: 't.id(t.integer())', int2: 't.id(t.smallint())' }
/** The types `t.providedId(type)` takes for a key the application gives; int8 is t.providedId()'s own. */
const PROVIDED_IDS = new Set(['int2', 'int4', 'text', 'varchar', 'bpchar'])

/**
 * The id builder of a primary key: from a sequence, `t.id()` (int8), `t.id(t.integer())` or
 * `t.id(t.smallint())`; without one, `t.providedId()` (int8) or `t.providedId(t.varchar(2))` and the
 * like. A uuid key is `t.uuidId()`, default or not: `create` may pass a key to it, and one it makes
 * (UUID v7) fits the column. Undefined for a type no id builder takes.
 */
function idBuilder(column: CatalogColumn, defaultSchema: string | undefined): string | undefined {
  if (column.elementTypeName !== undefined || column.enumValues) return undefined
  if (column.typeName === 'uuid') return 't.uuidId()'
  if (column.sequence && SEQUENCE_IDS[column.typeName]) return SEQUENCE_IDS[column.typeName]
  if (column.typeName === 'int8') return 't.providedId()'
  if (!PROVIDED_IDS.has(column.typeName)) return undefined
  const pulled = pulledType(column, defaultSchema)
  return typeof pulled === 'string' ? undefined : `t.providedId(${pulled.builder})`
}

/**
 * Entity names: the table's in PascalCase; a table whose name is used in another of the schemas
 * read gets its schema's in front (`billing.note` → `BillingNote`), but not in the default schema,
 * whose names stay as a pull of it alone makes them. A name still taken gets a number.
 */
function entityNames(tables: readonly CatalogTable[], defaultSchema: string | undefined): Map<string, string> {
  const uses = new Map<string, number>()
  for (const t of tables) uses.set(t.name, (uses.get(t.name) ?? 0) + 1)
  const taken = new Set<string>()
  const out = new Map<string, string>()
  const defaultFirst = [...tables].sort((a, b) => Number(a.schema !== defaultSchema) - Number(b.schema !== defaultSchema))
  for (const t of defaultFirst) {
    const wanted = entityName(uses.get(t.name)! > 1 && t.schema !== defaultSchema ? `${t.schema} ${t.name}` : t.name)
    let name = wanted
    for (let i = 2; taken.has(name); i++) name = `${wanted}${i}`
    taken.add(name)
    out.set(keyOf(t.schema, t.name), name)
  }
  return out
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
