/**
 * `flushwave migrate generate|up|down|status|check`: migrations generated from the schema module,
 * applied through postgres.js (which must be installed). Returns the exit status; cli.ts runs it.
 */
import { join, relative, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { modelOf, type DbModel } from '../catalog/model.js'
import type { Executor } from '../drivers/executor.js'
import { checkSchemaWith } from '../catalog/check.js'
import { DEFAULT_LEDGER_TABLE } from '../sql/render-ledger.js'
import { quoteIdent } from '../schema/quote.js'
import { PostgresJsExecutor, type PostgresJsLike } from '../drivers/postgres-js/executor.js'
import { FlushwaveError, SchemaMismatchError } from '../errors.js'
import type { Schema } from '../schema/define.js'
import { readMigrations, type Migration } from './files.js'
import { refuseUnlike } from './drift.js'
import { askRenames, generate, lastSnapshot, parseRenames, plan } from './generate.js'
import { migrateDown, migrateUp, migrationStatus, recordApplied, type MigrateOptions } from './runner.js'

export const MIGRATE_USAGE = `usage: flushwave migrate <command> [options]
  generate <name>   write migrations/<timestamp>_<name>/ (up.sql, down.sql, snapshot.json): what
                    takes the last migration's snapshot (an empty database before the first) to
                    the schema module's tables. With a database (--url, $DATABASE_URL), it first
                    checks that the database is at the last migration and is what the migrations
                    make (nothing changed by hand), and refuses otherwise
  up                apply every migration not applied yet, each in its own transaction
  down              undo the last applied migration
  status            list the migrations: applied, pending, edited since applied, missing
  check             exit 1, printing the difference, when the schema module and the migrations disagree
  baseline <name>   for a database made otherwise, that matches the schema module (checkSchema):
                    write the first migration, creating every table, and record it as applied

  --module <file>        the module that exports \`schema\` (generate, check); .ts needs tsx installed
  --dir <dir>            the migrations directory (default: migrations)
  --url <postgres url>   the database (default: $DATABASE_URL)
  --offline              generate: compare with no database, only with the last migration's snapshot
  --rename <a=b>         generate: a table renamed (table=new, schema.table=new) or a column
                         (table.column=new), never guessed; repeat it for several. In a terminal,
                         generate asks about a table or column dropped while another is created
  --allow-destructive    generate: write statements that can lose data or fail on existing rows
                         (dropping a column or table, narrowing a type, adding NOT NULL…)
  --knex                 generate: a knex migration file, <dir>/<timestamp>_<name>.ts (and its
                         .snapshot.json), for an application whose migrations knex runs
  --no-ledger            generate, check: the schema's Flushwave is made with outcomeLedger: false
  --idempotency-keys     generate, check: the application records idempotency keys (the table
                         flushwave_idempotency, as orm.unitOfWork(work, { idempotencyKey }) uses)
  --table <name>         the history table (default: flushwave_migrations; for --knex migrations
                         generate reads knex's, default knex_migrations)
  --lock-timeout <ms>    how long a statement may wait for a lock (default: 10000)`

type Values = {
  module?: string | undefined
  dir?: string | undefined
  url?: string | undefined
  offline?: boolean | undefined
  rename?: string[] | undefined
  'allow-destructive'?: boolean | undefined
  knex?: boolean | undefined
  'no-ledger'?: boolean | undefined
  'idempotency-keys'?: boolean | undefined
  table?: string | undefined
  'lock-timeout'?: string | undefined
  help?: boolean | undefined
}

export async function migrateMain(argv: readonly string[]): Promise<number> {
  let values: Values
  let positionals: string[]
  try {
    const parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        module: { type: 'string' },
        dir: { type: 'string', default: 'migrations' },
        url: { type: 'string' },
        offline: { type: 'boolean' },
        rename: { type: 'string', multiple: true },
        'allow-destructive': { type: 'boolean' },
        knex: { type: 'boolean' },
        'no-ledger': { type: 'boolean' },
        'idempotency-keys': { type: 'boolean' },
        table: { type: 'string' },
        'lock-timeout': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    })
    values = parsed.values
    positionals = parsed.positionals
  } catch (error) {
    console.error(`${(error as Error).message}\n${MIGRATE_USAGE}`)
    return 2
  }
  const [command, name, ...extra] = positionals
  if (values.help || command === undefined) {
    ;(values.help ? console.log : console.error)(MIGRATE_USAGE)
    return values.help ? 0 : 2
  }
  const known = ['generate', 'up', 'down', 'status', 'check', 'baseline']
  const named = command === 'generate' || command === 'baseline'
  if (!known.includes(command) || extra.length > 0 || named !== (name !== undefined)) {
    console.error(`flushwave migrate: ${known.includes(command) ? `unexpected arguments ${JSON.stringify(positionals.slice(1))}` : `unknown command ${JSON.stringify(command)}`}\n${MIGRATE_USAGE}`)
    return 2
  }
  const dir = resolve(values.dir ?? 'migrations')
  const migrations = await readMigrations(dir)
  if (command === 'generate' || command === 'check' || command === 'baseline') {
    if (values.module === undefined) {
      console.error(`flushwave migrate ${command}: --module names the module that exports \`schema\`\n${MIGRATE_USAGE}`)
      return 2
    }
    const schema = await loadSchema(values.module)
    const next = modelOf(schema, { ...(values['no-ledger'] ? { outcomeLedger: false } : {}), ...(values['idempotency-keys'] ? { idempotencyKeys: true } : {}) })
    if (command === 'baseline') return baseline(dir, migrations, schema, next, name!, values)
    if (command === 'check') {
      const { up } = plan(migrations, next)
      if (up.length === 0) return 0
      console.error(`flushwave migrate check: the schema module and the migrations disagree; \`flushwave migrate generate <name>\` would write:\n${up.map((s) => `  ${s.sql};`).join('\n')}`)
      return 1
    }
    const url = values.offline ? undefined : (values.url ?? process.env.DATABASE_URL)
    if (url) await connected(url, async (executor) => (await refuseUnlike(executor, migrations, lastSnapshot(migrations), next, values.table ? { table: values.table } : {}), 0))
    const previous = migrations.at(-1)?.snapshot
    let renames = parseRenames(values.rename ?? [], previous ?? next)
    // In a terminal, a table or column that would be dropped while another is created is asked about.
    if (process.stdin.isTTY && process.stdout.isTTY) renames = await askRenames(migrations, next, renames, terminalAsk)
    const knex = values.knex === true
    const written = await generate(dir, migrations, next, { name: name!, renames, allowDestructive: values['allow-destructive'] === true, knex })
    const where = join(relative(process.cwd(), dir) || '.', written === undefined ? '' : knex ? `${written.id}.ts` : `${written.id}/`)
    console.log(written ? `wrote ${where} (${written.up.length} statement${written.up.length === 1 ? '' : 's'} up, ${written.down.length} down)` : 'nothing to do: the migrations already make the schema')
    return 0
  }
  const byKnex = migrations.filter((m) => m.kind === 'knex')
  if (byKnex.length > 0) {
    console.error(`flushwave migrate ${command}: ${byKnex.length} of the migrations in ${dir} are knex migration files (${byKnex[0]!.id}…): knex applies them (knex migrate:latest, or the application's own migrator)`)
    return 2
  }
  const url = values.url ?? process.env.DATABASE_URL
  if (!url) {
    console.error(`flushwave migrate ${command}: no database: give --url or set DATABASE_URL\n${MIGRATE_USAGE}`)
    return 2
  }
  const options = runOptions(values)
  if (options === undefined) return 2
  return connected(url, async (executor) => {
    if (command === 'up') {
      const applied = await migrateUp(executor, migrations, options)
      if (applied.length === 0) console.log('nothing to apply')
    } else if (command === 'down') {
      if ((await migrateDown(executor, migrations, options)) === undefined) console.log('no migration is applied')
    } else {
      for (const row of await migrationStatus(executor, migrations, options)) console.log(`${row.state.padEnd(8)} ${row.id}${row.appliedAt ? `  ${row.appliedAt.toISOString()}` : ''}`)
    }
    return 0
  })
}

/** `baseline`: the database must match the schema already; the migration creates nothing and is recorded as applied. */
async function baseline(dir: string, migrations: readonly Migration[], schema: Schema, next: DbModel, name: string, values: Values): Promise<number> {
  if (migrations.length > 0) {
    console.error(`flushwave migrate baseline: ${dir} has migrations already; a baseline is the first one`)
    return 2
  }
  const url = values.url ?? process.env.DATABASE_URL
  const options = runOptions(values)
  if (!url || options === undefined) {
    if (!url) console.error(`flushwave migrate baseline: no database: give --url or set DATABASE_URL\n${MIGRATE_USAGE}`)
    return 2
  }
  return connected(url, async (executor) => {
    const ledger = values['no-ledger'] ? undefined : quoteIdent(DEFAULT_LEDGER_TABLE)
    const differences = await checkSchemaWith(schema, ledger, (statement) => executor.read(statement))
    if (differences.length > 0) {
      console.error(`flushwave migrate baseline: ${new SchemaMismatchError(differences).message} (what orm.checkSchema() reports); make them match first`)
      return 1
    }
    // Every table, as for a new database; this one has them, so it is recorded as applied instead.
    const written = await generate(dir, [], next, { name, allowDestructive: true })
    const [migration] = await readMigrations(dir)
    await recordApplied(executor, migration!, options)
    console.log(`wrote ${join(relative(process.cwd(), dir) || '.', written!.id)}/ (this database has its tables already; a new one gets them from it)`)
    return 0
  })
}

function runOptions(values: Values): MigrateOptions | undefined {
  const lockTimeoutMs = values['lock-timeout'] === undefined ? undefined : Number(values['lock-timeout'])
  if (lockTimeoutMs !== undefined && !(lockTimeoutMs > 0)) {
    console.error(`flushwave migrate: --lock-timeout takes a positive number of milliseconds, got ${values['lock-timeout']}`)
    return undefined
  }
  return { ...(values.table && { table: values.table }), ...(lockTimeoutMs && { lockTimeoutMs }), log: (line: string) => console.log(line) }
}

/** Runs `work` with an executor on a postgres.js connection to `url`, closed after. */
async function connected(url: string, work: (executor: Executor) => Promise<number>): Promise<number> {
  const postgres = (await import('postgres').catch(() => {
    throw new FlushwaveError('flushwave migrate needs postgres.js: npm install postgres')
  })) as unknown as { default: (url: string, options: object) => PostgresJsLike & { end(): Promise<void> } }
  // Unnamed statements: a migration runs each once, and a transaction-mode pooler keeps none.
  const sql = postgres.default(url, { max: 1, prepare: false, onnotice: () => {} })
  try {
    return await work(new PostgresJsExecutor(sql))
  } finally {
    await sql.end()
  }
}

/** A yes-or-no question on the terminal; anything but y or yes is no. */
async function terminalAsk(question: string): Promise<boolean> {
  const { createInterface } = await import('node:readline/promises')
  const terminal = createInterface({ input: process.stdin, output: process.stdout })
  try {
    return /^y(es)?$/i.test((await terminal.question(`${question} [y/N] `)).trim())
  } finally {
    terminal.close()
  }
}

/** The `schema` a module exports; a .ts module through tsx when Node cannot import it itself. */
async function loadSchema(file: string): Promise<Schema> {
  const url = pathToFileURL(resolve(file)).href
  let module: { schema?: unknown }
  try {
    module = (await import(url)) as { schema?: unknown }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_UNKNOWN_FILE_EXTENSION') throw error
    const tsx = (await import('tsx/esm/api' as string).catch(() => {
      throw new FlushwaveError(`${file}: Node cannot import TypeScript by itself; install tsx (npm install -D tsx), or give the compiled module`)
    })) as { tsImport(url: string, parent: string): Promise<unknown> }
    module = (await tsx.tsImport(url, import.meta.url)) as { schema?: unknown }
  }
  const schema = module.schema as Schema | undefined
  if (schema === undefined || typeof schema !== 'object' || !(schema.entities instanceof Map)) throw new FlushwaveError(`${file} exports no \`schema\` made by defineSchema`)
  return schema
}
