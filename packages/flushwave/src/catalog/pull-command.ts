/**
 * The `flushwave` command: `flushwave pull --url postgres://… --out src/schema.ts [--schema public,billing]
 * [--version-column version] [--exclude a,b]` writes a `defineSchema` module for an existing
 * database (pull-read.ts reads it, pull-generate.ts writes it). Reads through postgres.js, which must be
 * installed. Returns the exit status; cli.ts runs it.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { parseArgs } from 'node:util'
import { readCatalog } from './pull-read.js'
import { generateSchemaModule } from './pull-generate.js'

const USAGE = `usage: flushwave pull --url <postgres url> --out <file.ts> [--schema <schema,…>] [--version-column <name>] [--exclude <table,…>]
       flushwave migrate <generate|up|down|status|check> …   (flushwave migrate --help)
  --url              the database to read (default: $DATABASE_URL)
  --out              where to write the module (default: print it)
  --schema           the PostgreSQL schemas whose tables to read (default: public); the tables
                     and enums of the first are left to the search path, those of the others
                     get { schema: '…' }
  --version-column   an int4 column of this name becomes t.version() (optimistic locking)
  --exclude          tables to leave out (name, or schema.name), besides flushwave_outcome,
                     flushwave_migrations and knex's migration tables`

/** Tables that are the tools' own, never the application's entities. */
const ALWAYS_EXCLUDED = ['flushwave_outcome', 'flushwave_migrations', 'knex_migrations', 'knex_migrations_lock']

export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv
  if (command !== 'pull') {
    console.error(command === undefined || command === '--help' || command === '-h' ? USAGE : `unknown command ${JSON.stringify(command)}\n${USAGE}`)
    return command === '--help' || command === '-h' ? 0 : 2
  }
  let values: { url?: string | undefined; out?: string | undefined; schema?: string | undefined; 'version-column'?: string | undefined; exclude?: string | undefined; help?: boolean | undefined }
  try {
    values = parseArgs({
      args: [...rest],
      options: {
        url: { type: 'string' },
        out: { type: 'string' },
        schema: { type: 'string', default: 'public' },
        'version-column': { type: 'string' },
        exclude: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }).values
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`)
    return 2
  }
  if (values.help) {
    console.log(USAGE)
    return 0
  }
  const schemas = [...new Set((values.schema ?? 'public').split(',').map((s) => s.trim()))]
  if (schemas.includes('')) {
    console.error(`flushwave pull: --schema ${JSON.stringify(values.schema)} names an empty schema\n${USAGE}`)
    return 2
  }
  const url = values.url ?? process.env.DATABASE_URL
  if (!url) {
    console.error(`flushwave pull: no database: pass --url or set DATABASE_URL\n${USAGE}`)
    return 2
  }
  const { default: postgres } = await import('postgres').catch(() => {
    throw new Error('flushwave pull reads the database through postgres.js: npm i postgres')
  })
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 })
  try {
    const excluded = new Set([...ALWAYS_EXCLUDED, ...(values.exclude?.split(',').map((s) => s.trim()) ?? [])])
    const tables = (await readCatalog(async (text, params) => (await sql.unsafe(text, [...params]).values()) as unknown[][], schemas)).filter(
      (t) => !excluded.has(t.name) && !excluded.has(`${t.schema}.${t.name}`),
    )
    const where = new URL(url)
    const module = generateSchemaModule(tables, {
      source: `${where.hostname}:${where.port || 5432}${where.pathname}, ${schemas.length === 1 ? 'schema' : 'schemas'} ${schemas.join(', ')}`,
      versionColumn: values['version-column'],
      defaultSchema: schemas[0],
    })
    if (values.out) {
      // `--out src/schema.ts` in a new project: its folder may not exist yet.
      await mkdir(dirname(values.out), { recursive: true })
      await writeFile(values.out, module)
      console.error(`flushwave pull: ${tables.length} tables → ${values.out}`)
    } else process.stdout.write(module)
    return 0
  } finally {
    await sql.end({ timeout: 1 })
  }
}
