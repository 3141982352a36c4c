import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import { EMPTY_MODEL } from '../../src/catalog/diff.js'
import { modelOf } from '../../src/catalog/model.js'
import { readMigrations, splitStatements, writeKnexMigration, type Migration } from '../../src/migrate/files.js'
import { askRenames, parseRenames, plan, type Ask } from '../../src/migrate/generate.js'
import { versions } from '../support/schema-versions.js'

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

describe('renames asked in a terminal', () => {
  const asOf = (i: number): Migration[] => [{ kind: 'sql', id: `2026112800000${i}_v`, up: '', down: '', checksum: '', snapshot: modelOf(versions[i]!.schema) }]
  it('turn a drop and a create into the rename the flags would give, asking only about those', async () => {
    for (const i of [2, 8]) {
      const asked: string[] = []
      const yes: Ask = async (question) => (asked.push(question), true)
      const next = modelOf(versions[i]!.schema)
      const renames = await askRenames(asOf(i - 1), next, {}, yes)
      expect(plan(asOf(i - 1), next, renames).up, asked.join('; ')).toEqual(plan(asOf(i - 1), next, parseRenames(flagValues(versions[i]!.flags!), asOf(i - 1)[0]!.snapshot!)).up)
      if (i === 2) expect(asked).toEqual(['Was column title of "book" renamed to heading?'])
      if (i === 8) expect(asked).toEqual(['Was table "tag" renamed to "label"?', 'Was table "book_tag" renamed to "book_label"?', 'Was column tag_id of "book_label" renamed to label_id?'])
    }
  })
  it('leave the drop and the create on a no, and ask nothing when the flags said it', async () => {
    const asked: string[] = []
    const no: Ask = async (question) => (asked.push(question), false)
    const next = modelOf(versions[2]!.schema)
    expect(plan(asOf(1), next, await askRenames(asOf(1), next, {}, no)).up.map((s) => s.sql)).toContain('alter table "book" drop column "title"')
    expect(asked).toHaveLength(1)
    asked.length = 0
    await askRenames(asOf(1), next, parseRenames(['book.title=heading'], asOf(1)[0]!.snapshot!), no)
    expect(asked).toEqual([])
  })
})

/** `--rename a=b` pairs as parseRenames takes their values. */
const flagValues = (flags: readonly string[]): string[] => flags.filter((_, i) => i % 2 === 1)
