import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import { EMPTY_MODEL } from '../../src/catalog/diff.js'
import { readMigrations, splitStatements, writeKnexMigration } from '../../src/migrate/files.js'

describe('migration files', () => {
  it('split SQL at semicolons outside literals, quoted names, dollar quotes and comments', () => {
    const text = `-- head; comment
create table "a;b" (x text default 'it''s; fine');
/* block; comment */ select $tag$ a; b $tag$;

select ';' as "semi;colon"`
    expect(splitStatements(text)).toEqual([`create table "a;b" (x text default 'it''s; fine')`, `select $tag$ a; b $tag$`, `select ';' as "semi;colon"`])
  })

  it('write knex files whose knex.raw gets each statement exactly: backslashes, backticks, ${ and ? kept', async () => {
    // knex.raw sends SQL given without bindings as it is (checked: its toSQL() keeps a ? unchanged).
    const dir = await mkdtemp(join(tmpdir(), 'flushwave-knex-'))
    try {
      const tricky = "alter table t add constraint c check (doc ? 'k' and note <> '`${x}`' and path <> 'a\\\\b')"
      await writeKnexMigration(dir, '20261128000000_tricky', [{ sql: tricky, destructive: 'fails on rows it does not hold for' }], [{ sql: 'alter table t drop constraint c' }], EMPTY_MODEL)
      const module = (await import(pathToFileURL(join(dir, '20261128000000_tricky.ts')).href)) as { up(knex: unknown): Promise<void>; down(knex: unknown): Promise<void> }
      const sent: string[] = []
      const knex = { raw: async (sql: string) => void sent.push(sql) }
      await module.up(knex)
      await module.down(knex)
      expect(sent).toEqual([tricky, 'alter table t drop constraint c'])
      const [migration] = await readMigrations(dir)
      expect(migration).toMatchObject({ kind: 'knex', id: '20261128000000_tricky', snapshot: EMPTY_MODEL })
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
