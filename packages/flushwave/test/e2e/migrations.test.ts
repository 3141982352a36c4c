/**
 * `flushwave migrate`: migrations generated from a schema module walk it through fourteen versions
 * (test/support/schema-versions.ts), each applied with `up` (checkSchema() then empty) and undone
 * with `down` (the previous catalog back, as pg_catalog describes it); ten processes running `up`
 * at once on a database fourteen migrations behind apply each once; a migration that fails half
 * way leaves the database and its history as they were and names the statement; an edited applied
 * migration is refused; `check` and `generate` refuse what they must.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { createTablesSql, flushwave, MigrationError } from '../../src/index.js'
import { migrateMain } from '../../src/migrate/command.js'
import { readMigrations } from '../../src/migrate/files.js'
import { billing, versions } from '../support/schema-versions.js'

const root = fileURLToPath(new URL('../../', import.meta.url))
const support = fileURLToPath(new URL('../support/schema-versions.ts', import.meta.url))

describe('flushwave migrate', () => {
  let admin: postgres.Sql
  const databases: string[] = []
  let dir: string
  const migrations = () => join(dir, 'migrations')

  /** A database of its own: the command connects with the server's default search path. */
  async function database(): Promise<{ url: string; sql: postgres.Sql }> {
    const name = `migrate_${process.pid}_${databases.length}_${Date.now().toString(36)}`
    await admin.unsafe(`create database ${name}`)
    databases.push(name)
    const where = new URL(inject('databaseUrl'))
    where.pathname = `/${name}`
    return { url: where.toString(), sql: postgres(where.toString(), { max: 1, onnotice: () => {} }) }
  }

  beforeAll(async () => {
    admin = postgres(inject('databaseUrl'), { max: 1, onnotice: () => {} })
    dir = await mkdtemp(join(tmpdir(), 'flushwave-migrate-'))
  })
  afterAll(async () => {
    for (const name of databases) await admin.unsafe(`drop database if exists ${name} with (force)`)
    await admin?.end()
    await rm(dir, { recursive: true, force: true })
  })

  /** The catalog of the public schema and the extra one: what `down` must bring back exactly. */
  async function catalog(sql: postgres.Sql): Promise<unknown> {
    const spaces = ['public', billing]
    return {
      columns: await sql`
        select c.relname || '.' || a.attname as name, format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null,
               pg_get_expr(d.adbin, d.adrelid) as def, a.attidentity as identity, a.attgenerated as generated
        from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where n.nspname = any(${spaces}) and c.relkind = 'r' and c.relname <> 'flushwave_migrations' and a.attnum > 0 and not a.attisdropped order by 1`,
      constraints: await sql`
        select c.relname || '.' || con.conname as name, pg_get_constraintdef(con.oid) as def
        from pg_constraint con join pg_class c on c.oid = con.conrelid join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = any(${spaces}) and c.relname <> 'flushwave_migrations' order by 1`,
      indexes: await sql`select indexname as name, indexdef as def from pg_indexes where schemaname = any(${spaces}) and tablename <> 'flushwave_migrations' order by 1`,
      enums: await sql`select t.typname as name, array_agg(e.enumlabel::text order by e.enumsortorder) as labels from pg_type t join pg_enum e on e.enumtypid = t.oid group by 1 order by 1`,
    }
  }

  it('generates each version of a schema, applies it, and undoes it exactly', async () => {
    const { url, sql } = await database()
    try {
      let before = await catalog(sql)
      for (const [i, version] of versions.entries()) {
        const module = join(dir, `v${i + 1}.ts`)
        await writeFile(module, `import { versions } from ${JSON.stringify(support)}\nexport const schema = versions[${i}]!.schema\n`)
        const at = `v${i + 1} (${version.what})`
        // Generated with the database (at the previous version, as the migrations left it), and
        // without: the same statements.
        expect(await migrateMain(['generate', `v${i + 1}`, '--module', module, '--dir', migrations(), '--url', url, '--allow-destructive', ...(version.flags ?? [])]), at).toBe(0)
        expect(await migrateMain(['generate', `v${i + 1}`, '--module', module, '--dir', join(dir, 'offline'), '--offline', '--allow-destructive', ...(version.flags ?? [])]), at).toBe(0)
        const [live, offline] = await Promise.all([readMigrations(migrations()), readMigrations(join(dir, 'offline'))])
        expect(body(live.at(-1)!.up), at).toBe(body(offline.at(-1)!.up))
        expect(body(live.at(-1)!.down), at).toBe(body(offline.at(-1)!.down))
        expect(await migrateMain(['up', '--dir', migrations(), '--url', url]), at).toBe(0)
        expect(await flushwave({ schema: version.schema, sql }).checkSchema(), at).toEqual([])
        expect(await migrateMain(['check', '--module', module, '--dir', migrations()]), at).toBe(0)
        const after = await catalog(sql)
        expect(await migrateMain(['down', '--dir', migrations(), '--url', url]), at).toBe(0)
        expect(await catalog(sql), `${at} undone`).toEqual(before)
        expect(await migrateMain(['up', '--dir', migrations(), '--url', url]), at).toBe(0)
        expect(await catalog(sql), `${at} again`).toEqual(after)
        before = after
      }
      const history = await sql`select id from flushwave_migrations order by id`
      expect(history.map((r) => (r.id as string).slice(15))).toEqual(versions.map((_, i) => `v${i + 1}`))
    } finally {
      await sql.end()
    }
  })

  /** A migration file's statements, without the header that names it. */
  const body = (text: string): string => text.slice(text.indexOf('\n'))

  /** Every version's module, and its migration generated into `into` (offline: from the snapshots). */
  async function generateAll(into: string): Promise<void> {
    for (const [i, version] of versions.entries()) {
      const module = join(dir, `v${i + 1}.ts`)
      await writeFile(module, `import { versions } from ${JSON.stringify(support)}\nexport const schema = versions[${i}]!.schema\n`)
      expect(await migrateMain(['generate', `v${i + 1}`, '--module', module, '--dir', into, '--offline', '--allow-destructive', ...(version.flags ?? [])])).toBe(0)
    }
  }

  // Through PgBouncer in transaction pooling mode when CI runs this file behind one (scripts/pgbouncer.sh).
  const through = (url: string): string => {
    if (!process.env.PGBOUNCER_URL) return url
    const bouncer = new URL(process.env.PGBOUNCER_URL)
    const where = new URL(url)
    where.host = bouncer.host
    return where.toString()
  }

  it('applies each migration once when ten processes run `up` at once on a database fourteen behind', async () => {
    const { url: direct, sql } = await database()
    const url = through(direct)
    const own = join(dir, 'concurrent')
    await generateAll(own)
    try {
      const runs = await Promise.all(
        Array.from({ length: 10 }, () =>
          new Promise<{ code: number | null; out: string }>((done) => {
            const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'migrate', 'up', '--dir', own, '--url', url], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
            let out = ''
            child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
            child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()))
            child.on('close', (code) => done({ code, out }))
          }),
        ),
      )
      expect(runs.map((r) => r.code), runs.map((r) => r.out).join('\n')).toEqual(Array(10).fill(0))
      const applied = runs.flatMap((r) => r.out.split('\n').filter((line) => line.startsWith('applied ')))
      expect(applied.length).toBe(versions.length)
      expect(new Set(applied).size).toBe(versions.length)
      expect((await sql`select count(*)::int as n, count(distinct id)::int as ids from flushwave_migrations`)[0]).toEqual({ n: versions.length, ids: versions.length })
      expect(await flushwave({ schema: versions.at(-1)!.schema, sql }).checkSchema()).toEqual([])
    } finally {
      await sql.end()
    }
  }, 120_000)

  it('leaves the database and its history as they were when a migration fails half way, naming its statement', async () => {
    const { url, sql } = await database()
    const own = join(dir, 'failing')
    try {
      await writeFile(join(dir, 'one.ts'), `import { versions } from ${JSON.stringify(support)}\nexport const schema = versions[0]!.schema\n`)
      expect(await migrateMain(['generate', 'first', '--module', join(dir, 'one.ts'), '--dir', own, '--url', url])).toBe(0)
      const failing = join(own, '29990101000000_broken')
      await import('node:fs/promises').then((fs) => fs.mkdir(failing))
      await writeFile(join(failing, 'up.sql'), "create table kept (id int);\n\ninsert into kept values (1);\n\n-- a comment; with a semicolon\ninsert into nowhere values ('a;b');\n")
      await writeFile(join(failing, 'down.sql'), 'drop table kept;\n')
      const { migrateUp } = await import('../../src/migrate/runner.js')
      const orm = flushwave({ schema: versions[0]!.schema, sql })
      const error = await migrateUp(orm.executor, await readMigrations(own)).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(MigrationError)
      expect((error as MigrationError).migration).toBe('29990101000000_broken')
      expect((error as MigrationError).statement).toBe("insert into nowhere values ('a;b')")
      expect((error as Error).message).toMatch(/relation "nowhere" does not exist/)
      expect((await sql`select to_regclass('kept') as t`)[0]!.t).toBeNull()
      expect((await sql`select id from flushwave_migrations`).map((r) => (r.id as string).slice(15))).toEqual(['first'])
      // The command says the same and exits 1.
      expect(await migrateMain(['up', '--dir', own, '--url', url]).catch((e: unknown) => e)).toBeInstanceOf(MigrationError)

      // An applied migration edited afterwards is refused, and listed as such.
      await rm(failing, { recursive: true })
      const first = (await readMigrations(own))[0]!
      await writeFile(join(own, first.id, 'up.sql'), `${first.up}\n-- edited\n`)
      const edited = await migrateUp(orm.executor, await readMigrations(own)).catch((e: unknown) => e)
      expect((edited as Error).message).toMatch(/changed since it was applied/)
      const { migrationStatus } = await import('../../src/migrate/runner.js')
      expect((await migrationStatus(orm.executor, await readMigrations(own))).map((s) => s.state)).toEqual(['edited'])
    } finally {
      await sql.end()
    }
  })

  it('adopts a database made otherwise: a baseline that matches it, then migrations from there', async () => {
    const { url, sql } = await database()
    const own = join(dir, 'adopted')
    const module = (i: number) => join(dir, `v${i + 1}.ts`)
    await generateAll(join(dir, 'modules-for-baseline'))
    try {
      // An empty database does not match: refused, nothing written.
      expect(await migrateMain(['baseline', 'existing', '--module', module(0), '--dir', own, '--url', url])).toBe(1)
      for (const statement of createTablesSql(versions[0]!.schema)) await sql.unsafe(statement)
      expect(await migrateMain(['baseline', 'existing', '--module', module(0), '--dir', own, '--url', url])).toBe(0)
      expect(await migrateMain(['baseline', 'again', '--module', module(0), '--dir', own, '--url', url])).toBe(2) // a baseline is the first migration
      const [first] = await readMigrations(own)
      expect(first!.up).toMatch(/create table "author"/) // what a new database needs
      expect((await sql`select id from flushwave_migrations`).map((r) => r.id)).toEqual([first!.id])
      // Generated with the database: the tables createTablesSql made are what the baseline makes.
      expect(await migrateMain(['generate', 'second', '--module', module(1), '--dir', own, '--url', url, '--allow-destructive'])).toBe(0)
      expect(await migrateMain(['up', '--dir', own, '--url', url])).toBe(0)
      expect(await flushwave({ schema: versions[1]!.schema, sql }).checkSchema()).toEqual([])
      expect((await sql`select count(*)::int as n from flushwave_migrations`)[0]!.n).toBe(2)
      // A new database gets every table from the same migrations.
      const fresh = await database()
      try {
        expect(await migrateMain(['up', '--dir', own, '--url', fresh.url])).toBe(0)
        expect(await flushwave({ schema: versions[1]!.schema, sql: fresh.sql }).checkSchema()).toEqual([])
      } finally {
        await fresh.sql.end()
      }
    } finally {
      await sql.end()
    }
  })

  it('generates with a database only when it is at the last migration and as the migrations left it', async () => {
    await generateAll(join(dir, 'modules-for-drift'))
    const module = (i: number) => join(dir, `v${i + 1}.ts`)
    const own = join(dir, 'drift')
    const refusal = async (args: string[]): Promise<string> => {
      const error = await migrateMain(['generate', ...args, '--dir', own]).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(MigrationError)
      return (error as Error).message
    }
    // Tables of the schema made otherwise, and no migration yet: a baseline is the way.
    const made = await database()
    try {
      for (const statement of createTablesSql(versions[0]!.schema)) await made.sql.unsafe(statement)
      expect(await refusal(['first', '--module', module(0), '--url', made.url])).toMatch(/baseline[^]*drop table "book"/)
    } finally {
      await made.sql.end()
    }

    const { url, sql } = await database()
    try {
      expect(await migrateMain(['generate', 'first', '--module', module(0), '--dir', own, '--url', url])).toBe(0)
      // Not applied yet: generating again from this database would make its statements twice.
      expect(await refusal(['second', '--module', module(1), '--url', url, '--allow-destructive'])).toMatch(/not at the last migration \(\d{14}_first: pending\)/)
      expect(await migrateMain(['up', '--dir', own, '--url', url])).toBe(0)
      // Each change by hand is found, with the statement that would put it back; undone, generate goes on.
      const changes: [string, string, RegExp][] = [
        ['alter table book add column extra int4', 'alter table book drop column extra', /alter table "book" drop column "extra"/],
        ["alter table author alter column name set default 'x'", 'alter table author alter column name drop default', /alter table "author" alter column "name" drop default/],
        ['alter table author alter column name type varchar(10)', 'alter table author alter column name type text', /alter table "author" alter column "name" type text/],
        ['create index by_hand on book (title)', 'drop index by_hand', /drop index "by_hand"/],
        ['drop index book_author_id_idx', 'create index book_author_id_idx on book (author_id)', /create index "book_author_id_idx" on "book" \("author_id"\)/],
        ['alter table book add constraint title_check check (length(title) > 0)', 'alter table book drop constraint title_check', /drop constraint "title_check"/],
        ['alter table book drop constraint book_author_id_fkey, add constraint book_author_id_fkey foreign key (author_id) references author (id) on delete cascade', 'alter table book drop constraint book_author_id_fkey, add constraint book_author_id_fkey foreign key (author_id) references author (id)', /add constraint "book_author_id_fkey" foreign key \("author_id"\) references "author" \("id"\)(?! on delete)/],
        ['alter table book alter column title drop not null', 'alter table book alter column title set not null', /alter column "title" set not null/],
      ]
      for (const [change, undo, repair] of changes) {
        await sql.unsafe(change)
        const message = await refusal(['second', '--module', module(1), '--url', url, '--allow-destructive'])
        expect(message, change).toMatch(/differs from what the migrations make/)
        expect(message, change).toMatch(repair)
        await sql.unsafe(undo)
      }
      // Tables, columns and types outside the schema and the migrations are the database's own.
      await sql.unsafe('create table unrelated (id int); create type unrelated_mood as enum (\'up\')')
      expect(await migrateMain(['generate', 'second', '--module', module(1), '--dir', own, '--url', url, '--allow-destructive'])).toBe(0)
      expect((await readMigrations(own)).map((m) => m.id.slice(15))).toEqual(['first', 'second'])
    } finally {
      await sql.end()
    }
  })

  it('refuses a destructive migration without --allow-destructive, and check fails on a schema ahead of its migrations', async () => {
    const own = join(dir, 'refusing')
    await generateAll(join(dir, 'modules'))
    const module = (i: number) => join(dir, `v${i + 1}.ts`)
    expect(await migrateMain(['generate', 'first', '--module', module(0), '--dir', own, '--offline'])).toBe(0)
    const refused = await migrateMain(['generate', 'second', '--module', module(1), '--dir', own, '--offline']).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(MigrationError)
    expect((refused as Error).message).toMatch(/--allow-destructive[^]*unique \("email"\)/)
    expect(await migrateMain(['check', '--module', module(1), '--dir', own])).toBe(1)
    expect(await migrateMain(['check', '--module', module(0), '--dir', own])).toBe(0)
    expect(await migrateMain(['generate', 'again', '--module', module(0), '--dir', own, '--offline'])).toBe(0) // nothing to do: no directory written
    expect((await readMigrations(own)).map((m) => m.id.slice(15))).toEqual(['first'])
    expect(await readFile(join(own, (await readMigrations(own))[0]!.id, 'up.sql'), 'utf8')).toMatch(/^-- \d{14}_first: up\./)
    expect(await migrateMain(['--help'])).toBe(0)
    expect(await migrateMain(['frobnicate'])).toBe(2)
  })
})
