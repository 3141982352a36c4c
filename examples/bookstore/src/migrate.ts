/**
 * Runs the knex migrations of ../migrations. The app runs them at start (src/main.ts); by hand:
 * `pnpm --filter bookstore migrate [latest|rollback|status]` (src/migrate-cli.ts).
 */
import { readdir } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import knex, { type Knex } from 'knex'

export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations/', import.meta.url))

/**
 * The migration files, loaded with import() so that they run as TypeScript both under tsx and under
 * vitest (knex's own directory loader would hand .ts files to Node itself). Names are stored without
 * the extension.
 */
export class MigrationDirectory implements Knex.MigrationSource<string> {
  constructor(private readonly dir = MIGRATIONS_DIR) {}

  async getMigrations(): Promise<string[]> {
    const files = await readdir(this.dir)
    return files.filter((file) => /^\d{14}_[\w-]+\.ts$/.test(file)).sort()
  }

  getMigrationName(file: string): string {
    return file.replace(/\.ts$/, '')
  }

  async getMigration(file: string): Promise<Knex.Migration> {
    return (await import(pathToFileURL(path.join(this.dir, file)).href)) as Knex.Migration
  }
}

export interface MigrateOptions {
  /** A PostgreSQL URL: knex connects with pg (node-postgres), not through the app's pool. */
  url: string
  /** Create and look for the tables in this schema only (tests: one schema per file). */
  searchPath?: string | undefined
}

export function connect({ url, searchPath }: MigrateOptions): Knex {
  return knex({
    client: 'pg',
    connection: url,
    pool: { min: 0, max: 1 },
    ...(searchPath === undefined ? {} : { searchPath: [searchPath] }),
  })
}

/** Applies every pending migration; resolves with the names it applied. */
export async function migrateLatest(options: MigrateOptions): Promise<string[]> {
  const db = connect(options)
  try {
    const [, applied] = (await db.migrate.latest({ migrationSource: new MigrationDirectory() })) as [number, string[]]
    return applied
  } finally {
    await db.destroy()
  }
}
