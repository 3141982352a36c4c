import { createHash } from 'node:crypto'
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { DbModel } from '../catalog/model.js'
import type { Step } from '../catalog/diff.js'

/**
 * Migrations on disk: a directory each, `<timestamp>_<name>/` with `up.sql`, `down.sql` and
 * `snapshot.json` (the model the database has once it is applied, from which the next migration is
 * generated without a database). Ids sort by their timestamp; a checksum of both files tells an
 * edited migration from the one that was applied.
 */
export interface Migration {
  /** `sql`: a directory Flushwave applies; `knex`: a knex migration file, which knex applies (only its snapshot is read). */
  readonly kind: 'sql' | 'knex'
  readonly id: string
  readonly up: string
  readonly down: string
  readonly checksum: string
  readonly snapshot: DbModel | undefined
}

/** The migrations of `dir`, oldest first; none when the directory does not exist yet. */
export async function readMigrations(dir: string): Promise<Migration[]> {
  let entries
  try {
    entries = await readdir(dir, { withFileTypes: true })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw error
  }
  const ids = entries.filter((e) => e.isDirectory() && /^\d{14}_/.test(e.name)).map((e) => e.name)
  const knex = entries.filter((e) => e.isFile() && /^\d{14}_.*\.snapshot\.json$/.test(e.name)).map((e) => e.name)
  const sql = ids.map(async (id): Promise<Migration> => {
    const [up, down, snapshot] = await Promise.all([
      readFile(join(dir, id, 'up.sql'), 'utf8'),
      readFile(join(dir, id, 'down.sql'), 'utf8').catch(() => ''),
      readFile(join(dir, id, 'snapshot.json'), 'utf8').then((text) => JSON.parse(text) as DbModel, () => undefined),
    ])
    return { kind: 'sql', id, up, down, checksum: checksum(up, down), snapshot }
  })
  const knexOnes = knex.map(async (file): Promise<Migration> => {
    const snapshot = JSON.parse(await readFile(join(dir, file), 'utf8')) as DbModel
    return { kind: 'knex', id: file.replace(/\.snapshot\.json$/, ''), up: '', down: '', checksum: '', snapshot }
  })
  return (await Promise.all([...sql, ...knexOnes])).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

export function checksum(up: string, down: string): string {
  return createHash('sha256').update(up).update('\0').update(down).digest('hex')
}

/** Marks a statement that can lose data or fail on existing rows, on the line before it. */
export const DESTRUCTIVE = '-- flushwave: destructive:'

/** A migration file's text: a header, then each statement after a blank line, its warning above it. */
export function migrationText(id: string, direction: 'up' | 'down', steps: readonly Step[]): string {
  const lines = [`-- ${id}: ${direction}. Written by \`flushwave migrate generate\`; edit it before it is applied, never after.`]
  if (steps.length === 0) lines.push('-- (nothing to do)')
  for (const step of steps) lines.push('', ...(step.destructive ? [`${DESTRUCTIVE} ${step.destructive}`] : []), `${step.sql};`)
  return `${lines.join('\n')}\n`
}

export async function writeMigration(dir: string, id: string, up: readonly Step[], down: readonly Step[], snapshot: DbModel): Promise<string> {
  const at = join(dir, id)
  await mkdir(at, { recursive: true })
  await Promise.all([
    writeFile(join(at, 'up.sql'), migrationText(id, 'up', up)),
    writeFile(join(at, 'down.sql'), migrationText(id, 'down', down)),
    writeFile(join(at, 'snapshot.json'), `${JSON.stringify(snapshot, null, 2)}\n`),
  ])
  return at
}

/**
 * A knex migration file (`<id>.ts`) doing the same, for applications whose migrations knex runs
 * (each in its own transaction), and its snapshot beside it (`<id>.snapshot.json`).
 */
export async function writeKnexMigration(dir: string, id: string, up: readonly Step[], down: readonly Step[], snapshot: DbModel): Promise<string> {
  await mkdir(dir, { recursive: true })
  const body = (steps: readonly Step[]) =>
    steps.map((step) => `${step.destructive ? `  // ${DESTRUCTIVE.slice(3)} ${step.destructive}\n` : ''}  await knex.raw(\`${knexText(step.sql)}\`)`).join('\n')
  const text = [
    `// ${id}: written by \`flushwave migrate generate --knex\`; edit it before it is applied, never after.`,
    `// The tables once it is applied are in ${id}.snapshot.json, from which the next migration is generated.`,
    `import type { Knex } from 'knex'`,
    ``,
    `export async function up(knex: Knex): Promise<void> {`,
    body(up),
    `}`,
    ``,
    `export async function down(knex: Knex): Promise<void> {`,
    body(down),
    `}`,
    ``,
  ].join('\n')
  const file = join(dir, `${id}.ts`)
  await Promise.all([writeFile(file, text), writeFile(join(dir, `${id}.snapshot.json`), `${JSON.stringify(snapshot, null, 2)}\n`)])
  return file
}

/**
 * SQL in a template literal, as it is: backslashes, backticks and `${` escaped. knex.raw given no
 * bindings sends it unchanged, `?` included (its placeholders are read only with bindings).
 */
const knexText = (sql: string): string => sql.replace(/\\/g, '\\\\').replace(/`/g, '\\`').replace(/\$\{/g, '\\${')

/** `20261128093000`: a migration id's timestamp, in UTC. */
export function timestamp(date: Date): string {
  return date.toISOString().replace(/\D/g, '').slice(0, 14)
}

/**
 * The statements of an SQL file, split at each `;` outside quotes, quoted identifiers, dollar
 * quotes and comments; comments and blank statements dropped.
 */
export function splitStatements(text: string): string[] {
  const out: string[] = []
  let current = ''
  for (let i = 0; i < text.length; ) {
    const c = text[i]!
    if (c === '-' && text[i + 1] === '-') {
      const end = text.indexOf('\n', i)
      i = end < 0 ? text.length : end + 1
      current += '\n'
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2)
      i = end < 0 ? text.length : end + 2
      current += ' '
    } else if (c === "'" || c === '"') {
      // To the closing quote; a doubled one ('' or "") is part of the text.
      let j = i + 1
      while (j < text.length && !(text[j] === c && text[j + 1] !== c)) j += text[j] === c ? 2 : 1
      current += text.slice(i, j + 1)
      i = j + 1
    } else if (c === '$' && /^\$[A-Za-z_]*\$/.test(text.slice(i))) {
      const tag = /^\$[A-Za-z_]*\$/.exec(text.slice(i))![0]
      const end = text.indexOf(tag, i + tag.length)
      const stop = end < 0 ? text.length : end + tag.length
      current += text.slice(i, stop)
      i = stop
    } else if (c === ';') {
      if (current.trim() !== '') out.push(current.trim())
      current = ''
      i++
    } else {
      current += c
      i++
    }
  }
  if (current.trim() !== '') out.push(current.trim())
  return out
}
